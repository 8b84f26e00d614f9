"""One window per data directory: a second `fieldsync-gui` shows the running one and exits.

Tapping the launcher again (or a notification's action that starts the program) must not
start a second engine, embedded server and window over the same store: the person would see
two windows disagreeing for a moment, and two servers on one SQLite file. The first start
holds an advisory lock on `gui.lock` in the data directory for its lifetime (the kernel drops
it when the process dies, so a crash leaves nothing stale to clean up), and listens on a
local socket; a later start finds the lock taken, sends its `--open` target over the socket
and exits once the running one has answered.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from ui.qt import QLocalServer, QLocalSocket, connect

__all__ = ["SingleInstance", "socket_path"]

log = logging.getLogger("fieldsync.gui")

#: What the running instance answers once it has shown its window.
_SHOWN = b"shown\n"


def socket_path(data_dir: Path) -> str:
    """The local socket of `data_dir`'s instance: in the person's runtime directory (private
    to them; a Flatpak's own), named by the directory so that two data directories are two
    instances, and short enough for a Unix socket's 108 bytes wherever the data lives."""
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    folder = runtime if runtime and os.path.isdir(runtime) else tempfile.gettempdir()
    return os.path.join(folder, f"fieldsync-gui-{digest}.sock")


class SingleInstance:
    """The lock and the socket of one data directory's running window."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.name = socket_path(data_dir)
        self._lock: IO[str] | None = None
        self._server: QLocalServer | None = None

    def acquire(self) -> bool:
        """Take the data directory; False when another process holds it."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        handle = open(self.data_dir / "gui.lock", "a+", encoding="utf-8")  # noqa: SIM115
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._lock = handle
        return True

    def serve(self, on_request: Callable[[str], None]) -> None:
        """Listen for later starts; `on_request(target)` shows the window ("" for no page).

        A socket file left by a killed instance is removed first: the lock says it is ours."""
        assert self._lock is not None, "serve() needs acquire() first"
        QLocalServer.removeServer(self.name)
        server = QLocalServer()
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        if not server.listen(self.name):
            log.warning("cannot listen on %s: %s", self.name, server.errorString())
            return
        connect(server.newConnection, lambda: self._accept(server, on_request))
        self._server = server

    def _accept(self, server: QLocalServer, on_request: Callable[[str], None]) -> None:
        while (peer := server.nextPendingConnection()) is not None:
            connect(peer.readyRead, lambda peer=peer: self._read(peer, on_request))
            connect(peer.disconnected, peer.deleteLater)

    def _read(self, peer: QLocalSocket, on_request: Callable[[str], None]) -> None:
        if not peer.canReadLine():
            return
        target = bytes(peer.readLine().data()).decode("utf-8", "replace").strip()
        log.info("another start asked to show the window%s", f" at {target}" if target else "")
        try:
            on_request(target)
        finally:
            peer.write(_SHOWN)
            peer.flush()
            peer.disconnectFromServer()

    def forward(self, target: str, *, timeout: float = 15.0) -> bool:
        """Ask the running instance to show its window at `target`: True once it has, False
        if it did not within `timeout` s (it may still be starting, since the embedded server
        takes seconds, so connecting is retried until then)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            peer = QLocalSocket()
            peer.connectToServer(self.name)
            if peer.waitForConnected(200):
                peer.write(f"{target}\n".encode())
                peer.flush()
                while not peer.canReadLine() and time.monotonic() < deadline:
                    peer.waitForReadyRead(100)
                answered = peer.canReadLine() and bytes(peer.readLine().data()) == _SHOWN
                peer.abort()
                if answered:
                    return True
            time.sleep(0.1)
        return False

    def holder(self) -> str:
        """The process id the lock file names ("?" if unreadable), for the refusal's words."""
        try:
            return (self.data_dir / "gui.lock").read_text(encoding="utf-8").strip() or "?"
        except OSError:
            return "?"

    def release(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._lock is not None:
            with contextlib.suppress(OSError):
                self._lock.close()
            self._lock = None
