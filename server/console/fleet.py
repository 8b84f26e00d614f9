"""The fleet (`/console/devices`): every active device, how far behind it is, what it holds.

Last seen and last sync are what the server saw; the counts are what the device last
reported with a pull (server/devices/status.py), blank for one that never reported. The last
sync is coloured by its age against the settings' thresholds. An open page refreshes its
table with htmx; without JavaScript it is an ordinary page (reload to refresh).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import peewee as pw
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from server.console.render import age_words, page
from server.console.sessions import SignedIn, console_state
from server.db.store import Store
from server.settings import Settings

__all__ = ["FleetRow", "fleet_rows", "router", "sync_band"]

router = APIRouter()
#: Devices on one page of the fleet.
PAGE_ROWS = 200


@dataclass(frozen=True)
class FleetRow:
    name: str
    user: str
    team: str
    role: str
    app_version: str
    last_seen_at: float | None
    last_sync_at: float | None
    edits_waiting: int | None
    oldest_edit_since: float | None
    failed_changes: int | None
    uploads_waiting: int | None


def sync_band(settings: Settings, now: float, last_sync_at: float | None) -> str:
    """`good` under the amber threshold, `amber` under the red one, `bad` beyond, `never`."""
    if last_sync_at is None:
        return "never"
    age = now - last_sync_at
    if age < settings.console_sync_amber_seconds:
        return "good"
    if age < settings.console_sync_red_seconds:
        return "amber"
    return "bad"


_BAND_WORDS = {"good": "on time", "amber": "behind", "bad": "far behind", "never": "never synced"}


def fleet_rows(store: Store, team: str | None = None) -> list[FleetRow]:
    """Active devices with their status, by name; `team` keeps only that team's."""
    devices, status = store.tables.Device, store.tables.DeviceStatus
    query = (
        devices.select(
            devices.name,
            devices.user_name,
            devices.team,
            devices.role,
            pw.fn.COALESCE(status.app_version, ""),
            status.last_seen_at,
            status.last_sync_at,
            status.edits_waiting,
            status.oldest_edit_since,
            status.failed_changes,
            status.uploads_waiting,
        )  # fmt: skip
        .join(status, pw.JOIN.LEFT_OUTER, on=(status.device_id == devices.id))
        .where(devices.revoked_at.is_null())
        .order_by(devices.name)
    )
    if team is not None:
        query = query.where(devices.team == team)
    return [FleetRow(*values) for values in query.tuples().iterator()]


def _teams(store: Store) -> list[str]:
    devices = store.tables.Device
    query = devices.select(devices.team).where(devices.revoked_at.is_null()).distinct()
    return sorted(row.team for row in query if row.team)


#: Sort keys of the columns, each with its sort key of a row (None last either way).
_SORTS: dict[str, Any] = {
    "device": lambda r: r.name,
    "person": lambda r: r.user,
    "team": lambda r: r.team,
    "role": lambda r: r.role,
    "version": lambda r: r.app_version,
    "seen": lambda r: r.last_seen_at,
    "sync": lambda r: r.last_sync_at,
    "waiting": lambda r: r.edits_waiting,
    "oldest": lambda r: r.oldest_edit_since,
    "failed": lambda r: r.failed_changes,
    "uploads": lambda r: r.uploads_waiting,
}
COLUMNS = (
    ("device", "Device"),
    ("person", "Person"),
    ("team", "Team"),
    ("role", "Role"),
    ("version", "App version"),
    ("seen", "Last seen"),
    ("sync", "Last sync"),
    ("waiting", "Edits waiting"),
    ("oldest", "Oldest waiting edit"),
    ("failed", "Failed changes"),
    ("uploads", "Uploads waiting"),
)


def _sorted(rows: list[FleetRow], sort: str, descending: bool) -> list[FleetRow]:
    key = _SORTS.get(sort, _SORTS["device"])
    present = [row for row in rows if key(row) is not None]
    missing = [row for row in rows if key(row) is None]
    return sorted(present, key=key, reverse=descending) + missing


@router.get("/devices", response_class=HTMLResponse)
def fleet_page(
    request: Request,
    visit: SignedIn,
    sort: Annotated[str, Query(max_length=20)] = "device",
    order: Annotated[str, Query(pattern="^(asc|desc)$")] = "asc",
    team: Annotated[str | None, Query(max_length=100)] = None,
    page_number: Annotated[int, Query(alias="page", ge=1, le=100_000)] = 1,
) -> HTMLResponse:
    state = console_state(request)
    settings = state.settings
    now = settings.clock()
    chosen = team if team else None
    every = _sorted(fleet_rows(state.store, chosen), sort, order == "desc")
    # A page of rows: ten thousand rendered every ten seconds would keep a browser busy.
    pages = max(1, -(-len(every) // PAGE_ROWS))
    page_number = min(page_number, pages)
    rows = every[(page_number - 1) * PAGE_ROWS : page_number * PAGE_ROWS]
    lines = [
        {
            "row": row,
            "band": (band := sync_band(settings, now, row.last_sync_at)),
            "band_words": _BAND_WORDS[band],
            "seen": age_words(None if row.last_seen_at is None else now - row.last_seen_at),
            "sync": age_words(None if row.last_sync_at is None else now - row.last_sync_at),
            "oldest": ""
            if row.oldest_edit_since is None
            else age_words(now - row.oldest_edit_since).removesuffix(" ago"),
        }
        for row in rows
    ]
    partial = request.headers.get("HX-Request") == "true"
    return page(
        request,
        "fleet_table.html" if partial else "fleet.html",
        visit,
        {
            "title": "Fleet",
            "lines": lines,
            "columns": COLUMNS,
            "sort": sort if sort in _SORTS else "device",
            "order": order,
            "team": chosen or "",
            "teams": _teams(state.store),
            "poll_seconds": settings.console_poll_seconds,
            "total": len(every),
            "page_number": page_number,
            "pages": pages,
            "query": str(request.url.query),
        },
    )
