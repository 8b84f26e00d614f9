"""The headless worker notifies too (issue 24): `fieldsync worker` meets a conflict on the
real server and the desktop (python-dbusmock's notification daemon on a private session bus)
shows one notification of normal urgency whose action would open the app on it."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

from app.desktop.launch import app_command
from server.embedded import provision_device
from tests.e2e.conftest import cli_env, fieldsync_command, run_cli
from tests.support.api import ServerApi
from tests.support.dbus import PrivateBus, dbus_marks, private_bus
from tests.support.serve import ServerProcess

pytestmark = dbus_marks()


def test_the_worker_notifies_a_conflict(
    tmp_path: Path, server_process: ServerProcess, server_db: str, device_token: str
) -> None:
    url = server_process.base_url
    office = ServerApi(url, provision_device(server_db, "office", "admin"))
    data = tmp_path / "device"
    try:
        record = office.create(title="Replace valve", assignee="phone-e2e")
        pulled = run_cli(data, "--server", url, "sync", "--until-idle", token=device_token)
        assert pulled.returncode == 0, pulled.stderr
        edited = run_cli(data, "edit", record["id"], "notes=Gasket replaced")
        assert edited.returncode == 0, edited.stderr
        office.update(record["id"], 1, notes="Valve ordered, do not open").raise_for_status()
        with private_bus() as bus:
            bus.mock("notification_daemon")
            calls = _worker_notifications(bus, data, url, device_token, tmp_path / "worker.log")
            (call,) = calls
            assert call[3] == "A change needs you"
            assert call[6]["urgency"].value == 1
            assert call[6]["desktop-entry"].value == "io.github.fieldsync.Fieldsync"
            assert call[5] == ["default", "Open"]
    finally:
        office.close()
    # Its action starts the app on that conflict, on the worker's data dir and server.
    command = app_command(data, url, f"conflict:{record['id']}")
    assert command[-6:] == ["--data-dir", str(data), "--server", url, "--open",
                            f"conflict:{record['id']}"]  # fmt: skip


def _worker_notifications(
    bus: PrivateBus, data: Path, url: str, token: str, log_path: Path
) -> list[list[object]]:
    (daemon,) = bus.mocks
    with log_path.open("w") as log:
        worker = subprocess.Popen(
            [*fieldsync_command(), "--data-dir", str(data), "--server", url, "worker"],
            stdout=log, stderr=subprocess.STDOUT, text=True,
            env={**cli_env(token), **bus.env},
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not asyncio.run(daemon.calls("Notify")):
                assert worker.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.1)
            time.sleep(0.5)  # nothing more comes of one conflict
            return asyncio.run(daemon.calls("Notify"))
        finally:
            worker.terminate()
            worker.wait(30)
