"""A `fieldsync-server serve` process on a free loopback port, for the benchmarks.

The server runs in its own process so the device under test and the server do not share a
GIL; the benchmarks then measure what a phone and a host would each see.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from server.embedded import provision_device

__all__ = ["ServerProcess", "free_port", "temp_dir"]


def _server_command() -> list[str]:
    script = Path(sys.executable).parent / "fieldsync-server"
    return [str(script)] if script.exists() else [sys.executable, "-m", "server.cli"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """``fieldsync-server serve`` on a free loopback port, logging at ``log_level`` (by default
    ``warning``: no line per request), rate limit off; a fresh SQLite database in ``workdir``
    unless ``db_url``."""

    def __init__(
        self, workdir: Path, db_url: str | None = None, *, log_level: str = "warning"
    ) -> None:
        self.db_url = db_url or f"sqlite:///{workdir / 'server.sqlite3'}"
        self.log_level = log_level
        self.log_path = workdir / "server.log"
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    def add_device(self, name: str, *, user: str | None = None) -> str:
        """A worker device (of person `user`, else its own person); its bearer token."""
        return provision_device(self.db_url, name, user=user)

    def command(self) -> list[str]:
        """The server's argv (a subclass runs another program serving the same API)."""
        return [
            *_server_command(), "serve", "--db", self.db_url, "--host", "127.0.0.1",
            "--port", str(self.port), "--log-level", self.log_level, "--rate-limit-per-second", "0",
        ]  # fmt: skip

    @property
    def pid(self) -> int:
        assert self._process is not None, "start() first"
        return self._process.pid

    def start(self, timeout: float = 30.0) -> ServerProcess:
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/healthz", timeout=1.0).status_code == 200:
                    return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("server did not answer /healthz")

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=5)
        self._process = None

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def temp_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fieldsync-syncbench-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
