"""Small persistent key/value state of the device: sync token, server URL, metrics snapshot."""

from __future__ import annotations

import uuid
from typing import Any

from app.store.db import connection

__all__ = ["install_id", "read_setting", "write_setting"]

INSTALL_KEY = "install_id"


def read_setting(store: Any, key: str) -> str | None:
    row = (
        connection(store.db).execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
    )
    return None if row is None else str(row[0])


def write_setting(store: Any, key: str, value: str) -> None:
    """Inside the caller's transaction, or on its own (one statement commits by itself)."""
    connection(store.db).execute(
        "INSERT INTO settings (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def install_id(store: Any) -> str:
    """This store's own random id, made on first use: a reinstall (a new store) gets a new
    one, so the server sends it back what the old one wrote (server/scope/echoes.py)."""
    found = read_setting(store, INSTALL_KEY)
    if found is None:  # two processes making one at once: the first one's stays
        connection(store.db).execute(
            "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
            (INSTALL_KEY, uuid.uuid4().hex),
        )
        found = read_setting(store, INSTALL_KEY)
    assert found is not None
    return found
