"""End-to-end fixtures: `fieldsync-server serve` as a subprocess, the `fieldsync` command, and
a private desktop for the GUI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.embedded import provision_device
from tests.e2e.desktop import Desktop
from tests.support.serve import ServerProcess

FIELDSYNC = Path(sys.executable).parent / "fieldsync"


def fieldsync_command() -> list[str]:
    if FIELDSYNC.exists():
        return [str(FIELDSYNC)]
    return [sys.executable, "-m", "app.cli"]


def cli_env(token: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "FIELDSYNC_TOKEN"}
    # No keyring in these tests: the token comes from the environment (a service account).
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
    env["PYTHONUNBUFFERED"] = "1"
    if token is not None:
        env["FIELDSYNC_TOKEN"] = token
    return env


def run_cli(
    data_dir: Path, *args: str, token: str | None = None, timeout: float = 90.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*fieldsync_command(), "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        env=cli_env(token),
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def server_db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'server.sqlite3'}"


@pytest.fixture
def server_process(server_db: str) -> Iterator[ServerProcess]:
    with ServerProcess(server_db, "--rate-limit-per-second", "0") as running:
        yield running


@pytest.fixture
def device_token(server_db: str, server_process: ServerProcess) -> str:
    return provision_device(server_db, "phone-e2e")


@pytest.fixture
def desktop() -> Iterator[Desktop]:
    """A private desktop (Xvfb, D-Bus, AT-SPI) for one GUI test, stopped after it."""
    running = Desktop().start()
    yield running
    running.stop()
