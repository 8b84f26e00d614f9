"""Typing survives a kill (issue 24): the installed `fieldsync-gui` at phone size, typed into
through the accessibility tree, SIGKILLed 300 ms after the last keystroke, started again.

The work order opens with the typing in its field and "Restored your unsaved changes from
HH:MM" (the draft's local time) with Keep and Discard; a new work order's typing opens the
app on it. Nothing of a draft reaches the server until Save.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import time
from pathlib import Path

from server.embedded import provision_device
from tests.e2e.desktop import Desktop, Gui, Screen, gui_marks
from tests.support.api import ServerApi
from tests.support.serve import ServerProcess

pytestmark = gui_marks()

TITLE = "Replace valve at gate 4"
NOTES = "Gasket replaced, valve greased"
KILL_AFTER_S = 0.3


def draft_time(data_dir: Path, entity_id: str) -> str:
    """The HH:MM (local) of the draft the device holds for `entity_id`."""
    uri = f"file:{data_dir / 'fieldsync.sqlite3'}?mode=ro"
    with sqlite3.connect(uri, uri=True, timeout=10) as conn:
        row = conn.execute(
            "SELECT updated_at FROM drafts WHERE entity_id = ?", (entity_id,)
        ).fetchone()
    assert row is not None, f"no draft of {entity_id!r} on the device"
    return time.strftime("%H:%M", time.localtime(row[0]))


def killed(gui: Gui, screen: Screen) -> None:
    """SIGKILL, 300 ms after the typing was last seen on screen (so after the last key)."""
    time.sleep(KILL_AFTER_S)
    os.kill(gui.process.pid, signal.SIGKILL)
    gui.process.wait(10)
    screen.close()


def test_typing_survives_a_sigkill(tmp_path: Path, desktop: Desktop) -> None:
    db = f"sqlite:///{tmp_path / 'server.sqlite3'}"
    server = ServerProcess(db, "--rate-limit-per-second", "0").start()
    office = ServerApi(server.base_url, provision_device(db, "office", "admin"))
    token = provision_device(db, "phone-gui")
    record = office.create(title=TITLE, site="North yard", assignee="phone-gui")
    data = tmp_path / "phone"
    guis: list[Gui] = []
    screen: Screen | None = None

    def start() -> Screen:
        gui = Gui.phone(desktop, tmp_path, server.base_url, token)
        guis.append(gui)
        gui.wait_running()
        return Screen(desktop, gui)

    try:
        screen = start()
        screen.wait(f"{TITLE}, Synced", 60)
        screen.click(TITLE, role=None, prefix=True)
        screen.reveal("Notes")
        screen.type_text("Notes", NOTES)
        killed(guis[-1], screen)

        screen = start()
        screen.wait(f"{TITLE}, Synced", 60)
        screen.click(TITLE, role=None, prefix=True)
        notice = screen.wait(re.compile(r"^Restored your unsaved changes from \d\d:\d\d$"), 30)
        assert notice == f"Restored your unsaved changes from {draft_time(data, record['id'])}"
        names = screen.names()
        assert "Keep" in names
        assert "Discard" in names
        screen.reveal("Notes")
        screen.wait(NOTES)
        # A draft is never sent: the server still has the work order as the office wrote it.
        (on_server,) = [r for r in office.all_changes(limit=100) if r["id"] == record["id"]]
        assert not on_server.get("notes")

        # A new work order's typing: the app opens on it again.
        screen.click("Back")
        screen.click("Discard")  # leaving asks first; this drops the restored typing
        screen.click("New")
        screen.type_text("Title", "Leak under the sink")
        killed(guis[-1], screen)

        screen = start()
        screen.wait(re.compile(r"^Restored your unsaved changes from \d\d:\d\d$"), 60)
        screen.wait("Leak under the sink")
        assert draft_time(data, "")  # the new form's draft, until Save
        screen.reveal("Save")
        screen.click("Save")
        screen.wait(re.compile(r"^Work order$"), 30)  # saved: no longer "New work order"
        screen.click("Back")
        screen.wait(re.compile(r"^Leak under the sink, "), 30)
    finally:
        if screen is not None:
            screen.close()
        for gui in guis:
            gui.stop()
        server.stop()
        office.close()
