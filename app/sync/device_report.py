"""What a device tells the office of itself with each pull (the `Fieldsync-Device-Status`
header of `GET /v1/changes`, described in server/devices/status.py).

Counts only, plus up to ten failed changes with their reasons, so the office can call the
worker; the fix and the retry stay on the device. Read in the store's executor; pure JSON out.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
from typing import Any

from app.store.db import connection
from app.store.deadletters import list_dead
from app.store.stats import outstanding_depth, upload_figures
from app.store.store import Store

__all__ = ["STATUS_HEADER", "device_report", "encode_report"]

STATUS_HEADER = "Fieldsync-Device-Status"
#: The server ignores a longer header; failed changes are dropped from the end to fit.
MAX_HEADER_CHARS = 8192
_FAILED_LISTED = 10
_TEXT_CHARS = 200


@functools.cache  # reading the installed distributions costs tens of ms per pull
def app_version() -> str:
    try:
        return importlib.metadata.version("fieldsync")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _uploads_waiting(store: Store) -> int:
    """Unsent files that will still go (not failed), as `fieldsync status` counts them."""
    return upload_figures(connection(store.db))["waiting"]


def device_report(store: Store) -> dict[str, Any]:
    """The report as of now (runs in the store's executor)."""
    now = store.clock()
    depth = outstanding_depth(store)
    oldest = depth.get("oldest_pending_age_s")
    failed = list_dead(store, limit=_FAILED_LISTED, with_attempts=False)
    return {
        "app_version": app_version(),
        "edits_waiting": int(depth.get("pending", 0)) + int(depth.get("leased", 0)),
        "oldest_edit_age_s": None if oldest is None else round(float(oldest), 1),
        "failed_changes": int(depth.get("dead", 0)),
        "uploads_waiting": _uploads_waiting(store),
        "failed": [
            {
                "entity_id": job.entity_id,
                "title": (job.title or "")[:_TEXT_CHARS],
                "code": job.reason_code or job.kind,
                "reason": job.last_error[:_TEXT_CHARS],
                "age_s": round(max(now - job.failed_at, 0.0), 1),
            }
            for job in failed
        ],
    }


def encode_report(report: dict[str, Any]) -> str:
    """Compact ASCII JSON (a header value), shortened to fit by listing fewer failures."""
    failed = list(report.get("failed", []))
    while True:
        text = json.dumps({**report, "failed": failed}, separators=(",", ":"), ensure_ascii=True)
        if len(text) <= MAX_HEADER_CHARS or not failed:
            return text
        failed.pop()
