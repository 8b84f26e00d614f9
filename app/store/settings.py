"""Small persistent key/value state of the device: sync token, server URL, metrics snapshot."""

from __future__ import annotations

from typing import Any

from app.store.db import connection

__all__ = ["read_setting", "write_setting"]


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
