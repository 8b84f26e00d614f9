"""Failed changes (`/console/failed`): what the phones hold as failed, so the office can call.

The list is what each device reported with its last pull (server/devices/status.py); the fix
and the retry stay on the device, so this page only shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from server.console.render import age_words, page
from server.console.sessions import SignedIn, console_state
from server.db.store import Store

__all__ = ["FailedOnDevice", "failed_changes", "router"]

router = APIRouter()


@dataclass(frozen=True)
class FailedOnDevice:
    device: str
    user: str
    team: str
    entity_id: str
    title: str
    code: str
    reason: str
    since: float
    #: When the device last reported: the list is as of then.
    reported_at: float


def failed_changes(store: Store, device: str | None = None) -> list[FailedOnDevice]:
    """Every active device's reported failed changes, oldest failure first."""
    devices, status = store.tables.Device, store.tables.DeviceStatus
    query = (
        devices.select(
            devices.name, devices.user_name, devices.team, status.failed, status.reported_at
        )  # fmt: skip
        .join(status, on=(status.device_id == devices.id))
        .where(devices.revoked_at.is_null(), status.failed != "[]")
    )
    if device is not None:
        query = query.where(devices.name == device)
    found = []
    for name, user, team, failed, reported_at in query.tuples().iterator():
        for item in json.loads(failed):
            found.append(
                FailedOnDevice(
                    name,
                    user,
                    team,
                    item["entity_id"],
                    item.get("title") or "",
                    item.get("code", ""),
                    item.get("reason", ""),
                    item["since"],
                    reported_at,
                )  # fmt: skip
            )
    return sorted(found, key=lambda item: item.since)


@router.get("/failed", response_class=HTMLResponse)
def failed_page(
    request: Request,
    visit: SignedIn,
    device: Annotated[str | None, Query(max_length=100)] = None,
) -> HTMLResponse:
    state = console_state(request)
    now = state.settings.clock()
    items = failed_changes(state.store, device or None)
    lines = [
        {"item": item, "since": age_words(now - item.since),
         "reported": age_words(now - item.reported_at)}
        for item in items
    ]  # fmt: skip
    return page(
        request,
        "failed.html",
        visit,
        {"title": "Failed changes", "lines": lines, "device": device or ""},
    )
