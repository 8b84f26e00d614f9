"""Attachments the changes feed tells of: colleagues' (metadata only) and our own, confirmed.

A page carries each record's current ``attachments`` list and, beside the records, the
attachment changes themselves (``attachments``: each with its ``entity_id``, a removed one a
tombstone with ``deleted: true``). Applied in the page's transaction (`app.sync.reconcile`).
A colleague's attachment is metadata only: its bytes stay on the server, a thumbnail is
fetched when it is shown. Seen in the feed, an attachment of ours is confirmed: the server
holds it whole, even if the reply to our last chunk was lost.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Iterable
from typing import Any

from app.attachments import rows

__all__ = ["apply_feed_attachments", "feed_attachment_problem"]

_REQUIRED: tuple[tuple[str, type], ...] = (
    ("id", str),
    ("filename", str),
    ("size", int),
    ("sha256", str),
)


def feed_attachment_problem(item: Any) -> str | None:
    """Why an attachment of the feed cannot be stored, or None."""
    if not isinstance(item, dict):
        return "attachment that is not an object"
    for name, kind in _REQUIRED:
        value = item.get(name)
        if not isinstance(value, kind) or isinstance(value, bool):
            return f"attachment without a usable {name}"
    return None


def _epoch(value: Any, default: float) -> float:
    if not isinstance(value, str):
        return default
    try:
        return dt.datetime.fromisoformat(value).timestamp()
    except ValueError:
        return default


def _row(item: dict[str, Any], entity_id: str, now: float) -> tuple[Any, ...]:
    return (
        item["id"],
        entity_id,
        item["filename"],
        str(item.get("content_type") or "application/octet-stream"),
        int(item["size"]),
        item["sha256"],
        _epoch(item.get("created_at"), now),
        item.get("created_by") if isinstance(item.get("created_by"), str) else None,
        now,
    )


def apply_feed_attachments(
    conn: sqlite3.Connection,
    records: Iterable[dict[str, Any]],
    changes: Iterable[dict[str, Any]],
    now: float,
) -> set[str]:
    """Store what the page says about attachments; returns the work orders concerned."""
    upserts: list[tuple[Any, ...]] = []
    removed: list[tuple[float, str]] = []
    touched: set[str] = set()
    for record in records:
        listed = record.get("attachments")
        if isinstance(listed, list):
            for item in listed:
                upserts.append(_row(item, str(record["id"]), now))
                touched.add(str(record["id"]))
    for item in changes:
        entity_id = str(item.get("entity_id"))
        touched.add(entity_id)
        if item.get("deleted"):
            removed.append((now, item["id"]))
        else:
            upserts.append(_row(item, entity_id, now))
    rows.from_feed(conn, upserts)
    # The thumbnail stays counted until `app.attachments.retention.forget_departed` deletes
    # its file after the page's transaction (the bytes never go inside one).
    rows.tombstone(conn, removed)
    return touched
