"""Run the real server in-process, on 127.0.0.1 and a free port, for the app and tests.

    from server.embedded import start_server

    with start_server("sqlite:////tmp/fs/server.sqlite3") as server:
        token = server.add_device("phone-1")          # role "worker" by default
        httpx.get(f"{server.base_url}/v1/changes", headers={"Authorization": f"Bearer {token}"})

`start_server` binds the socket itself (port 0 → the kernel picks), so `base_url` is known
before the first request and the server is accepting when the call returns. Its connections
have Nagle off, as `fieldsync-server serve`'s do (`server.listen`). `stop()` (or leaving
the `with`) shuts uvicorn down and joins its thread.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from types import TracebackType
from typing import Any

import uvicorn

from server.app import create_app
from server.auth import Role, add_device
from server.db.store import Store, open_store
from server.listen import listening_socket, uvicorn_config
from server.settings import Settings

__all__ = ["EmbeddedServer", "provision_device", "start_server"]


class EmbeddedServer:
    """A uvicorn server running `create_app(settings)` in a background thread."""

    def __init__(self, settings: Settings, sock: socket.socket) -> None:
        self.settings = settings
        self._socket = sock
        host, port = sock.getsockname()[:2]
        self.base_url = f"http://{host}:{port}"
        self.app = create_app(settings)
        config = uvicorn_config(self.app, timeout_graceful_shutdown=5)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name="fieldsync-server",
            daemon=True,
        )

    @property
    def store(self) -> Store:
        """The server's own database handle (for test assertions)."""
        store: Store = self.app.state.server.store
        return store

    def start(self, timeout: float = 10.0) -> None:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("embedded fieldsync server did not start")
            time.sleep(0.01)

    def add_device(
        self, name: str, role: Role = "worker", *, user: str | None = None, team: str = ""
    ) -> str:
        """Provision a device on this server's database; return its bearer token."""
        return provision_device(self.settings.db_url, name, role, user=user, team=team)

    def stop(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._socket.close()

    def __enter__(self) -> EmbeddedServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def start_server(
    db_url: str | None = None, *, settings: Settings | None = None, **overrides: Any
) -> EmbeddedServer:
    """Start a server on 127.0.0.1:<free port> and return it once it accepts connections.

    Give `db_url` (e.g. `sqlite:////abs/path.sqlite3`), or full `settings`; keyword
    `overrides` replace single settings (e.g. `rate_limit_per_second=0` to disable the limit).
    """
    base = settings or (Settings(db_url=db_url) if db_url else Settings())
    if db_url and settings:
        overrides["db_url"] = db_url
    chosen = dataclasses.replace(base, **overrides)
    sock = listening_socket("127.0.0.1", 0)
    try:
        server = EmbeddedServer(chosen, sock)
    except BaseException:
        sock.close()
        raise
    server.start()
    return server


def provision_device(
    db_url: str, name: str, role: Role = "worker", *, user: str | None = None, team: str = ""
) -> str:
    """Add a device to the database at `db_url`; return its token (shown only this once)."""
    store = open_store(db_url)
    try:
        return add_device(store, name, role, user=user, team=team)
    finally:
        store.close()
