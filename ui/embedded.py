"""The local sync server `make run` starts beside the app, and the device token it uses.

The token is provisioned once per data dir and kept in the system keyring under an account
that names this data dir (`embedded_account`), so later launches reuse the same device instead
of adding one to the server every time. Without a usable keyring the token lives only in memory
for this session. It is never written to SQLite or logged.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
from pathlib import Path
from typing import Any

from app.credentials import CredentialsError, get_token, store_token
from ui.tasks import Executor

__all__ = [
    "EmbeddedServerUnavailable",
    "embedded_account",
    "embedded_person",
    "is_first_run",
    "start_embedded_server",
]

log = logging.getLogger("fieldsync.gui")

#: The packages of the `server` extra; the app itself never needs them.
SERVER_PACKAGES = frozenset({"fastapi", "starlette", "uvicorn", "psycopg2"})


class EmbeddedServerUnavailable(RuntimeError):
    """The local server `make run` starts needs the `fieldsync[server]` extra."""


def _require_server_extra() -> None:
    """Import the server's web stack, or say plainly what to install (or to pass --server)."""
    try:
        import server.embedded  # noqa: F401
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in SERVER_PACKAGES:
            raise
        raise EmbeddedServerUnavailable(
            f"the embedded sync server needs the fieldsync[server] extra ({exc.name} is not "
            "installed): pip install 'fieldsync[server]', or start with --server URL to sync "
            "with a running server"
        ) from exc


def embedded_account(data_dir: Path) -> str:
    """A stable keyring account for this data dir's server (its port changes every launch).

    `.invalid` is reserved (RFC 2606): the name can never reach a real host."""
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]
    return f"http://embedded.fieldsync.invalid/{digest}"


def _device_is_active(db_url: str, token: str) -> bool:
    from server.auth import authenticate
    from server.db.store import open_store

    store = open_store(db_url)
    try:
        return authenticate(store, f"Bearer {token}") is not None
    finally:
        store.close()


def _server_db(data_dir: Path) -> Path:
    return data_dir / "embedded-server" / "server.sqlite3"


def is_first_run(data_dir: Path) -> bool:
    """The embedded server has never run for this data dir (ask before starting it)."""
    return not _server_db(data_dir).exists()


def embedded_person(data_dir: Path, token: str) -> tuple[str, str]:
    """(person, team) of this device on its embedded server ("", "": not known)."""
    from server.auth import authenticate
    from server.db.store import open_store

    store = open_store(f"sqlite:///{_server_db(data_dir)}")
    try:
        device = authenticate(store, f"Bearer {token}")
    finally:
        store.close()
    return ("", "") if device is None else (device.user, device.team)


def _stored_token(account: str) -> str | None:
    try:
        # environ={}: FIELDSYNC_TOKEN belongs to a real server, not this local one.
        return get_token(account, environ={})
    except CredentialsError as exc:
        log.info("no stored token for the embedded server: %s", exc)
        return None


async def start_embedded_server(data_dir: Path, executor: Executor) -> tuple[Any, str]:
    """Start the server on loopback with its SQLite file in `data_dir`; (server, token).

    Raises EmbeddedServerUnavailable when the `server` extra is not installed."""
    _require_server_extra()
    from server.embedded import provision_device, start_server

    _server_db(data_dir).parent.mkdir(parents=True, exist_ok=True)
    db_url = f"sqlite:///{_server_db(data_dir)}"
    server = await asyncio.to_thread(start_server, db_url)
    account = embedded_account(data_dir)
    token = await executor.run(_stored_token, account)
    if token:
        active = await asyncio.to_thread(_device_is_active, db_url, token)
        if active:
            log.info("embedded server: reusing this device's token from the keyring")
            return server, token
    name = f"this-device-{secrets.token_hex(3)}"
    token = await asyncio.to_thread(provision_device, db_url, name)
    try:
        await executor.run(store_token, account, token)
        log.info("embedded server: provisioned %s, token kept in the keyring", name)
    except CredentialsError as exc:
        log.info("embedded server: provisioned %s; token kept in memory only (%s)", name, exc)
    return server, token
