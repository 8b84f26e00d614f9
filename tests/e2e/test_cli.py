"""`fieldsync` as a subprocess: sync gives up on time when the server is down, and a missing
credential is one clear line."""

from __future__ import annotations

import time
from pathlib import Path

from tests.e2e.conftest import run_cli
from tests.support.serve import ServerProcess
from tests.sync.sync_support import closed_port_url


def test_sync_until_idle_times_out_when_the_server_is_down(tmp_path: Path) -> None:
    data_dir = tmp_path / "device"
    assert run_cli(data_dir, "create", "title=Pump").returncode == 0
    started = time.monotonic()
    result = run_cli(
        data_dir, "--server", closed_port_url(), "sync", "--until-idle", "--timeout", "2",
        token="service-token",
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == "fieldsync: not idle before the timeout (pending 1)"
    assert not [line for line in lines if "Traceback" in line]
    assert elapsed < 15  # the timeout, the stop grace and the interpreter start


def test_sync_without_any_credential_says_what_to_do(tmp_path: Path) -> None:
    result = run_cli(tmp_path / "device", "--server", closed_port_url(), "sync", "--until-idle")
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("fieldsync: ")
    assert "FIELDSYNC_TOKEN" in line


def test_sync_until_idle_exits_zero_once_delivered(
    tmp_path: Path, server_process: ServerProcess, device_token: str
) -> None:
    data_dir = tmp_path / "device"
    assert run_cli(data_dir, "create", "title=Pump").returncode == 0
    result = run_cli(
        data_dir, "--server", server_process.base_url, "sync", "--until-idle", "--timeout", "30",
        token=device_token,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "idle: done 1"
    assert device_token not in result.stdout + result.stderr
