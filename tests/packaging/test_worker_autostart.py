"""The XDG autostart entry starts the headless worker where there is no systemd user session
(postmarketOS on OpenRC), stays out of the way where there is one, and shares the app's
worker lock: it stands by while the lock is held instead of delivering beside its holder."""

from __future__ import annotations

import configparser
import queue
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

from packaging_support import APP_ID, RESOURCES, ROOT, run_tool

from app.store.lock import WorkerLock
from app.store.store import Store

AUTOSTART = RESOURCES / f"{APP_ID}-worker.desktop"


def _entry() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(AUTOSTART, encoding="utf-8")
    return parser["Desktop Entry"]


def test_the_autostart_entry_validates() -> None:
    result = run_tool("desktop-file-validate", str(AUTOSTART))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "error:" not in result.stdout + result.stderr


def test_it_starts_the_worker_that_waits_for_the_lock() -> None:
    entry = _entry()
    command = entry["Exec"].split()
    assert command == ["fieldsync", "worker", "--wait-for-lock"]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert command[0] in pyproject["project"]["scripts"]
    assert entry["NoDisplay"] == "true"  # not an app in the launcher
    assert entry["Icon"] == APP_ID


def test_a_systemd_session_leaves_it_to_the_user_unit() -> None:
    entry = _entry()
    assert entry["X-systemd-skip"] == "true"  # systemd-xdg-autostart-generator
    assert entry["X-GNOME-HiddenUnderSystemd"] == "true"  # gnome-session


def test_the_install_docs_say_which_to_use_where() -> None:
    install = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    assert AUTOSTART.name in install
    assert "OpenRC" in install
    assert "~/.config/autostart/" in install
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert AUTOSTART.name in readme


def wait_for_line(process: subprocess.Popen[str], wanted: str, timeout: float) -> str:
    """What `process` printed up to its first line containing `wanted` (its stdout, text)."""
    assert process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
            if wanted in line:
                return

    threading.Thread(target=pump, daemon=True).start()
    read = ""
    deadline = time.monotonic() + timeout
    while wanted not in read:
        try:
            read += lines.get(timeout=max(deadline - time.monotonic(), 0))
        except queue.Empty:
            raise AssertionError(f"no {wanted!r} within {timeout} s:\n{read}") from None
    return read


def test_while_the_app_holds_the_lock_the_autostarted_worker_stands_by(tmp_path: Path) -> None:
    data = tmp_path / "device"
    with Store(data) as store:
        store.record_edit("create", None, {"title": "Waits for the lock"})
    held = WorkerLock(data)
    held.acquire()  # the app, delivering
    env = {"FIELDSYNC_TOKEN": "t", "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
           "PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"}  # fmt: skip
    base = [str(Path(sys.executable).parent / "fieldsync"), "--data-dir", str(data),
            "--server", "http://127.0.0.1:9", "worker"]  # fmt: skip
    try:
        # The service's worker exits (systemd restarts it later)...
        refused = subprocess.run(base, capture_output=True, text=True, env=env, timeout=60)
        assert refused.returncode == 2
        assert "already delivering" in refused.stderr
        # ...the autostarted one stands by, delivering nothing beside the lock's holder.
        worker = subprocess.Popen(
            [*base, "--wait-for-lock"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env=env,
        )  # fmt: skip
        try:
            # Its first try at the lock comes after its SIGTERM handler is in place: until
            # then a busy machine may still be importing, and SIGTERM would kill it (-15).
            read = wait_for_line(worker, "standing by", timeout=60)
            assert worker.poll() is None, read
            with Store(data) as store:
                assert store.stats()["queue_depth"]["pending"] == 1
        finally:
            worker.terminate()
            out, _ = worker.communicate(timeout=30)
        assert worker.returncode == 0, read + out
        assert "worker: stopped" in out, read + out
    finally:
        held.release()
