"""A device's status as the office sees it: when the server saw it, and what it says it holds.

A device reports its counts with the pull it makes anyway, in one request header, so
reporting costs no request of its own:

    Fieldsync-Device-Status: {"app_version": "0.1.0", "edits_waiting": 3,
        "oldest_edit_age_s": 5400, "failed_changes": 1, "uploads_waiting": 0,
        "failed": [{"entity_id": "…", "title": "…", "code": "invalid", "reason": "…",
                    "age_s": 3600}]}

(compact JSON, ASCII, at most 8 KiB). A header the server cannot read is ignored and logged:
the pull it came with goes on, and the fleet shows what the server saw itself (last seen,
last sync). Ages are sent rather than times, so a device's wrong clock does not move them.
"""

from __future__ import annotations

import json
import logging
import threading
import weakref
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from server.db.best_effort import write_unless_busy
from server.db.store import Store
from server.logs import log_event

__all__ = [
    "STATUS_HEADER",
    "DeviceReport",
    "FailedChange",
    "note_pull",
    "note_seen",
    "parse_report",
]

logger = logging.getLogger("server.device_status")  # the name its log lines carried

STATUS_HEADER = "Fieldsync-Device-Status"
STATUS_DESCRIPTION = (
    "What the device holds, for the office console's fleet page (optional; compact JSON, at"
    ' most 8 KiB): `{"app_version", "edits_waiting", "oldest_edit_age_s", "failed_changes",'
    ' "uploads_waiting", "failed": [{"entity_id", "title", "code", "reason", "age_s"}]}`.'
    " Ages in seconds. An unreadable value is ignored; the pull goes on."
)
MAX_HEADER_CHARS = 8192
#: The server notes a device seen at most this often (seconds) per process: a write per
#: request would queue every request behind SQLite's one writer.
SEEN_RESOLUTION_S = 60.0

_Count = Annotated[int, Field(ge=0, le=10**9)]
_Text = Annotated[str, Field(max_length=300)]


class FailedChange(BaseModel):
    """One change the device holds as failed: the fix and the retry stay on the device."""

    model_config = ConfigDict(extra="ignore")

    entity_id: Annotated[str, Field(max_length=36)]
    title: _Text | None = None
    #: Why, as a code (the app's `Reason`, e.g. `invalid`, `not_found`, `gave_up`).
    code: Annotated[str, Field(max_length=64)] = ""
    #: Why, in the words the device shows.
    reason: _Text = ""
    #: Seconds since it failed.
    age_s: Annotated[float, Field(ge=0, le=10**10)] = 0.0


class DeviceReport(BaseModel):
    """The `Fieldsync-Device-Status` header of a pull (every field optional)."""

    model_config = ConfigDict(extra="ignore")

    app_version: Annotated[str, Field(max_length=64)] = ""
    edits_waiting: _Count | None = None
    oldest_edit_age_s: Annotated[float, Field(ge=0, le=10**10)] | None = None
    failed_changes: _Count | None = None
    uploads_waiting: _Count | None = None
    failed: Annotated[list[FailedChange], Field(max_length=50)] = []


def parse_report(header: str | None) -> DeviceReport | None:
    """The report in a header value, or None (absent, too long, or not a report)."""
    if not header:
        return None
    if len(header) > MAX_HEADER_CHARS:
        log_event(logger, logging.WARNING, "device status too long", chars=len(header))
        return None
    try:
        return DeviceReport.model_validate(json.loads(header))
    except (ValueError, ValidationError) as error:
        problem = type(error).__name__
        log_event(logger, logging.WARNING, "device status unreadable", problem=problem)
        return None


_seen_lock = threading.Lock()
_seen: weakref.WeakKeyDictionary[Store, dict[int, float]] = weakref.WeakKeyDictionary()


def _upsert(store: Store, device_id: int, values: dict[str, Any]) -> bool:
    """Note `values` for the device unless SQLite's writer is busy (True when noted): a
    request never waits behind a batch to leave a note the next request leaves again."""
    table = store.tables.DeviceStatus

    def write() -> None:
        updated = table.update(**values).where(table.device_id == device_id).execute()
        if not updated:
            table.insert(device_id=device_id, **values).on_conflict(
                conflict_target=[table.device_id], update=values
            ).execute()

    return write_unless_busy(store, write)


def note_seen(store: Store, device_id: int, now: float) -> None:
    """The device made an authenticated request now (noted at most once a minute)."""
    with _seen_lock:
        noted = _seen.setdefault(store, {})
        if abs(now - noted.get(device_id, float("-inf"))) < SEEN_RESOLUTION_S:
            return
        noted[device_id] = now
    if not _upsert(store, device_id, {"last_seen_at": now}):
        with _seen_lock:  # not noted after all: the next request tries again
            noted.pop(device_id, None)


def note_pull(
    store: Store, device_id: int, now: float, header: str | None, *, complete: bool
) -> None:
    """A pull of the changes feed: its report (if any) and, at its last page, a sync."""
    values: dict[str, Any] = {"last_seen_at": now}
    if complete:
        values["last_sync_at"] = now
    report = parse_report(header)
    if report is not None:
        oldest = report.oldest_edit_age_s
        values.update(
            reported_at=now,
            app_version=report.app_version,
            edits_waiting=report.edits_waiting,
            oldest_edit_since=None if oldest is None else now - oldest,
            failed_changes=report.failed_changes,
            uploads_waiting=report.uploads_waiting,
            failed=json.dumps(
                [
                    {**item.model_dump(exclude={"age_s"}), "since": now - item.age_s}
                    for item in report.failed
                ]
            ),
        )
    _upsert(store, device_id, values)
