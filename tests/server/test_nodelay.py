"""Every accepted connection has Nagle off (`TCP_NODELAY`), however the server was started.

With Nagle on, a kept-alive connection waits ~40 ms per request for the client's delayed ACK.
The option is read on the server's side of a real connection: the accepted socket is found by
its inode in /proc/net/tcp, fetched out of whichever process holds it (pidfd_getfd) and asked
with getsockopt; nothing in the server reports on itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from server.embedded import start_server
from tests.support.serve import ServerProcess, descendants

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

_SYS_PIDFD_GETFD = 438  # the same number on every architecture Linux numbers uniformly


@dataclass(frozen=True)
class Accepted:
    """The server side of one connection: who holds it and its TCP_NODELAY."""

    pid: int
    nodelay: int


def _inode_of_accepted(server_port: int, client_port: int) -> int:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if (local_port, remote_port) == (server_port, client_port):
                return int(fields[9])
    raise AssertionError(f"no connection 127.0.0.1:{server_port} <- :{client_port}")


def _holder(inode: int) -> tuple[int, int]:
    """(pid, fd) of the process that holds socket `inode`."""
    wanted = f"socket:[{inode}]"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) == wanted:
                        return int(entry.name), int(fd.name)
    raise AssertionError(f"no process holds {wanted}")


def _borrow_fd(pid: int, fd: int) -> int:
    if pid == os.getpid():
        return os.dup(fd)
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        borrowed = int(libc.syscall(_SYS_PIDFD_GETFD, pidfd, fd, 0))
    finally:
        os.close(pidfd)
    if borrowed < 0:
        code = ctypes.get_errno()
        if code in (errno.ENOSYS, errno.EPERM):
            pytest.skip(f"cannot read another process's socket here: {os.strerror(code)}")
        raise OSError(code, os.strerror(code))
    return borrowed


def accepted(server_port: int, client_port: int) -> Accepted:
    """Read TCP_NODELAY on the server's accepted socket for this client connection."""
    pid, fd = _holder(_inode_of_accepted(server_port, client_port))
    with socket.socket(fileno=_borrow_fd(pid, fd)) as sock:
        assert sock.getsockname()[1] == server_port
        return Accepted(pid, sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


def kept_alive_connections(base_url: str, count: int) -> Iterator[tuple[int, int]]:
    """(server port, client port) of `count` connections, each used twice (kept alive)."""
    for _ in range(count):
        with httpx.Client(base_url=base_url, timeout=10.0) as client:
            ports = set()
            for _ in range(2):
                response = client.get("/healthz")
                assert response.status_code == 200
                stream = response.extensions["network_stream"]
                server_addr, client_addr = (
                    stream.get_extra_info(k) for k in ("server_addr", "client_addr")
                )
                ports.add((server_addr[1], client_addr[1]))
            assert len(ports) == 1, "the client opened a second connection"
            yield ports.pop()


def assert_nodelay_on_every_connection(base_url: str, holders: Callable[[], set[int]]) -> None:
    for server_port, client_port in kept_alive_connections(base_url, 4):
        socket_ = accepted(server_port, client_port)
        assert socket_.pid in holders(), f"pid {socket_.pid} is not the server"
        assert socket_.nodelay == 1, f"Nagle is on for the connection from :{client_port}"


# -- the inspection itself can see Nagle on -------------------------------------------------


def test_the_inspection_reads_nagle_on_where_it_is_on() -> None:
    # A listener made as `fieldsync-server serve` made it before: proto 0, nothing set.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(listener.getsockname()) as client:
            server_side, _ = listener.accept()
            with server_side:
                found = accepted(listener.getsockname()[1], client.getsockname()[1])
    assert found == Accepted(os.getpid(), 0)


# -- each way of starting the server --------------------------------------------------------


def test_fieldsync_server_serve(sqlite_url: str) -> None:
    with ServerProcess(sqlite_url) as server:
        pid = server.pid
        assert_nodelay_on_every_connection(server.base_url, lambda: {pid})


def test_fieldsync_server_serve_with_workers(sqlite_url: str) -> None:
    with ServerProcess(sqlite_url, "--workers", "2") as server:
        pid = server.pid
        workers = descendants(pid)
        assert len(workers) >= 2  # the workers (and multiprocessing's resource tracker)
        assert_nodelay_on_every_connection(server.base_url, lambda: descendants(pid))


def test_uvicorn_workers_with_our_protocol(sqlite_url: str, tmp_path: Path) -> None:
    """uvicorn binds this listener itself (proto 0): our protocol class alone sets the option."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable, "-m", "uvicorn", "--factory", "server.app:create_app",
        "--host", "127.0.0.1", "--port", str(port), "--workers", "2",
        "--http", "server.listen:NoDelayHttpToolsProtocol", "--log-level", "warning",
    ]  # fmt: skip
    log = (tmp_path / "uvicorn.log").open("wb")
    env = {**os.environ, "FIELDSYNC_SERVER_DB": sqlite_url}
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (tmp_path / "uvicorn.log").read_text()
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base_url}/healthz", timeout=1.0).status_code == 200:
                    break
            assert time.monotonic() < deadline, "uvicorn did not answer /healthz"
            time.sleep(0.1)
        assert_nodelay_on_every_connection(base_url, lambda: descendants(process.pid))
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def test_embedded_server(sqlite_url: str) -> None:
    with start_server(sqlite_url) as server:
        assert_nodelay_on_every_connection(server.base_url, lambda: {os.getpid()})


def test_the_apps_embedded_server(tmp_path: Path) -> None:
    from keyring.backends import null

    from app import credentials
    from app.executor import StoreExecutor
    from ui.embedded import start_embedded_server

    credentials.set_backend_for_tests(null.Keyring())
    executor = StoreExecutor()
    try:
        server, _token = asyncio.run(start_embedded_server(tmp_path, executor))
        try:
            assert_nodelay_on_every_connection(server.base_url, lambda: {os.getpid()})
        finally:
            server.stop()
    finally:
        executor.shutdown()
        credentials.set_backend_for_tests(None)
