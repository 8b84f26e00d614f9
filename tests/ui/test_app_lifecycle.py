"""The program around the window: the crash dialog, the embedded server's reused device token,
and a clean stop on SIGTERM / SIGINT (the real program as a subprocess, waited on by log line).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from keyring.backend import KeyringBackend
from keyring.backends import null

from app import credentials
from app.executor import StoreExecutor
from server.auth import list_devices
from server.db.store import open_store
from tests.ui.conftest import Runner
from tests.ui.test_single_instance import second_start
from ui import crash
from ui.embedded import embedded_account, start_embedded_server
from ui.qt import QApplication, QMessageBox, QTimer
from ui.tasks import TaskOwner

ROOT = Path(__file__).resolve().parents[2]

# -- crash dialog -------------------------------------------------------------------------


class CrashDialogs:
    """Reads every crash dialog the hook shows, then presses "Ok" (as a person would)."""

    def __init__(self) -> None:
        self.shown: list[dict[str, str]] = []

    def expect_one(self) -> None:
        QTimer.singleShot(20, self._close)

    def _close(self) -> None:
        box = QApplication.activeModalWidget()
        if not isinstance(box, QMessageBox):
            QTimer.singleShot(20, self._close)  # not shown yet
            return
        self.shown.append({"title": box.windowTitle(), "details": box.detailedText()})
        box.button(QMessageBox.StandardButton.Ok).click()


# WORKAROUND: the offscreen platform warns that it cannot propagate a dialog's size hints; it
# is a property of the headless test platform, not of the dialog.
offscreen_dialog = pytest.mark.qt_log_ignore("does not support propagateSizeHints")


@pytest.fixture
def dialogs(run: Runner, monkeypatch: pytest.MonkeyPatch) -> Iterator[CrashDialogs]:
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # restored after the test
    crash.install(run.loop)
    yield CrashDialogs()
    run.loop.set_exception_handler(None)


@offscreen_dialog
def test_a_failed_task_is_logged_and_shown_not_silent(
    run: Runner, dialogs: CrashDialogs, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken() -> None:
        raise RuntimeError("the pump exploded")

    dialogs.expect_one()
    owner = TaskOwner()
    with caplog.at_level(logging.CRITICAL, logger="fieldsync.crash"):
        owner.start(broken())
        run.until(lambda: bool(dialogs.shown))
    assert dialogs.shown[0]["title"] == "Fieldsync ran into a bug"
    assert "RuntimeError: the pump exploded" in dialogs.shown[0]["details"]
    assert any("the pump exploded" in r.getMessage() for r in caplog.records)
    assert QApplication.instance() is not None  # "Ok" keeps the app running


def test_an_exception_in_a_loop_callback_reaches_the_dialog(
    run: Runner, dialogs: CrashDialogs, monkeypatch: pytest.MonkeyPatch
) -> None:
    def callback() -> None:
        raise ValueError("bad reading")

    shown: list[str] = []
    monkeypatch.setattr(crash, "show_dialog", shown.append)

    async def schedule() -> None:
        asyncio.get_running_loop().call_soon(callback)
        await asyncio.sleep(0)

    run(schedule())
    run.until(lambda: bool(shown))
    assert "ValueError: bad reading" in shown[0]


# -- the embedded server's device token ---------------------------------------------------


class MemoryKeyring(KeyringBackend):
    """A keyring in memory that passes the plaintext refusal (a real one ranks ≥ 1)."""

    priority = 5  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.secrets: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.secrets.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.secrets[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.secrets.pop((service, username), None)


def _launch(run: Runner, data_dir: Path) -> str:
    executor = StoreExecutor()
    try:
        server, token = run(start_embedded_server(data_dir, executor), timeout=20)
        server.stop()
    finally:
        executor.shutdown()
    return str(token)


def _device_count(data_dir: Path) -> int:
    store = open_store(f"sqlite:///{data_dir / 'embedded-server' / 'server.sqlite3'}")
    try:
        return len(list_devices(store))
    finally:
        store.close()


def test_embedded_server_reuses_the_token_kept_in_the_keyring(
    run: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keyring = MemoryKeyring()
    credentials.set_backend_for_tests(keyring)
    monkeypatch.setenv("FIELDSYNC_TOKEN", "belongs-to-a-real-server")
    try:
        first = _launch(run, tmp_path)
        second = _launch(run, tmp_path)
    finally:
        credentials.set_backend_for_tests(None)
    assert first == second
    assert first != "belongs-to-a-real-server"
    assert _device_count(tmp_path) == 1
    assert list(keyring.secrets.values()) == [first]
    assert ("fieldsync", embedded_account(tmp_path)) in keyring.secrets


def test_without_a_keyring_the_token_stays_in_memory(run: Runner, tmp_path: Path) -> None:
    credentials.set_backend_for_tests(null.Keyring())
    try:
        first = _launch(run, tmp_path)
        second = _launch(run, tmp_path)
    finally:
        credentials.set_backend_for_tests(None)
    assert first != second  # a new device each session: nothing was written down
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert first.encode() not in path.read_bytes(), path


# -- SIGTERM / SIGINT ---------------------------------------------------------------------


def _start_gui(data_dir: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "QT_QUICK_BACKEND": "software",
        "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "ui.main", "--data-dir", str(data_dir)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


class Output:
    """The subprocess's output lines, read on a thread, waited on with timeouts."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._reader.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, needle: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(needle in line for line in self.lines):
                return
            time.sleep(0.05)
        raise AssertionError(f"no {needle!r} within {timeout} s; got:\n" + "\n".join(self.lines))


def _start_again_shows_this_window(data_dir: Path, out: Output) -> None:
    """The launcher tapped again while the program runs: the second start shows this one's
    window at its page and exits, with no engine or embedded server of its own."""
    done = second_start(data_dir, "--open", "dead")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"already running on {data_dir}; showed its window" in done.stdout
    assert "embedded sync server" not in done.stdout + done.stderr
    out.wait_for("another start asked to show the window at dead", 10)
    assert sum("embedded sync server on" in line for line in out.lines) == 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_signal_stops_engine_and_embedded_server_cleanly(tmp_path: Path, signum: int) -> None:
    proc = _start_gui(tmp_path / "data")
    out = Output(proc)
    try:
        out.wait_for("fieldsync-gui running", 60)
        assert any("embedded sync server on http://127.0.0.1:" in line for line in out.lines)
        if signum == signal.SIGTERM:
            _start_again_shows_this_window(tmp_path / "data", out)
        proc.send_signal(signum)
        out.wait_for("fieldsync-gui stopped", 30)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
    output = "\n".join(out.lines)
    assert f"received {signal.Signals(signum).name}" in output
    assert "Traceback" not in output
    assert "fst_" not in output  # the token never reaches a log
