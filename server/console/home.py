"""The console's front page: what needs the office's attention, in numbers."""

from __future__ import annotations

from collections import Counter

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from server.console.failed import failed_changes
from server.console.fleet import fleet_rows, sync_band
from server.console.render import page
from server.console.sessions import SignedIn, console_state

__all__ = ["router"]

router = APIRouter()


@router.get("/", response_class=HTMLResponse)
def front_page(request: Request, visit: SignedIn) -> HTMLResponse:
    state = console_state(request)
    now = state.settings.clock()
    bands = Counter(sync_band(state.settings, now, row.last_sync_at)
                    for row in fleet_rows(state.store))  # fmt: skip
    conflicts = state.store.tables.Conflict
    open_conflicts = conflicts.select().where(conflicts.status == "open").count()
    return page(
        request,
        "home.html",
        visit,
        {
            "title": "Overview",
            "bands": bands,
            "devices": sum(bands.values()),
            "failed": len(failed_changes(state.store)),
            "open_conflicts": open_conflicts,
        },
    )
