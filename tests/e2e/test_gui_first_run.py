"""A first run that shows the product (issue 24): `fieldsync-gui` with its embedded server
opens on sample work orders marked as samples; Settings removes them in one step;
`--no-samples` starts empty. The installed app, driven through its accessibility tree."""

from __future__ import annotations

import re
from pathlib import Path

from tests.e2e.desktop import Desktop, Gui, Screen, gui_marks

pytestmark = gui_marks()


def launch(desktop: Desktop, tmp_path: Path, name: str, *args: str) -> Gui:
    """The app on its embedded server (no --server), its data in tmp_path/name."""
    gui = Gui(
        desktop, tmp_path / f"{name}.log", "--data-dir", str(tmp_path / name),
        "--size", "360x720", *args, token="",
    )  # fmt: skip
    gui.wait_running()
    return gui


def test_the_first_run_has_samples_removed_in_one_step(tmp_path: Path, desktop: Desktop) -> None:
    gui = launch(desktop, tmp_path, "first")
    screen = Screen(desktop, gui)
    try:
        screen.wait(re.compile(r"^Sample: Replace the pump seal, "), 60)
        screen.wait(re.compile(r"^Sample: Read the depot 3 meters, "))
        screen.click("Menu")
        screen.click("Settings", role=None)
        screen.reveal("Remove the 4 sample work orders")
        screen.click("Remove the 4 sample work orders")
        screen.wait("Removed 4 sample work orders.")
        screen.click("Back")
        screen.until(
            lambda: not any(name.startswith("Sample: ") for name in screen.names()), 30,
            "no sample left",
        )  # fmt: skip
    finally:
        screen.close()
        gui.stop()
    assert gui.process.returncode == 0, gui.log()[-2000:]
    assert "added 4 sample work orders" in gui.log()

    # Started again: its server's first run is over, the samples do not come back.
    again = launch(desktop, tmp_path, "first")
    try:
        assert "sample work orders" not in again.log()
    finally:
        again.stop()


def test_no_samples_starts_empty(tmp_path: Path, desktop: Desktop) -> None:
    gui = launch(desktop, tmp_path, "empty", "--no-samples")
    screen = Screen(desktop, gui)
    try:
        screen.wait("Online", 60)
        assert not any(name.startswith("Sample: ") for name in screen.names())
    finally:
        screen.close()
        gui.stop()
    assert "sample work orders" not in gui.log()
