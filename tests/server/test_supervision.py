"""`serve --workers N`: the workers end with their supervisor, however it ends.

A supervisor killed with SIGKILL runs no shutdown, so without `PR_SET_PDEATHSIG` its workers
kept serving the port: a restarted server could not bind it and a stopped unit still answered.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest

from server.supervision import end_with_supervisor
from tests.support.serve import ServerProcess, descendants

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux prctl")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _port_refuses(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        try:
            probe.connect((host, port))
        except OSError:
            return True
    return False


def test_workers_end_when_the_supervisor_is_killed(sqlite_url: str) -> None:
    server = ServerProcess(sqlite_url, "--workers", "2").start()
    workers: set[int] = set()
    try:
        url = httpx.URL(server.base_url)
        assert httpx.get(f"{server.base_url}/healthz", timeout=5).status_code == 200
        workers = descendants(server.pid)
        assert len(workers) >= 2
        os.kill(server.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [pid for pid in workers if _alive(pid)] == []
        assert _port_refuses(url.host, url.port or 80)
    finally:
        server.stop()
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_the_supervisor_itself_is_never_tied_to_its_own_parent() -> None:
    end_with_supervisor(os.getpid())  # called where the supervisor runs: a no-op
    assert _alive(os.getpid())
