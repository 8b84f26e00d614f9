"""Conflicts (`/console/conflicts`): the admin review queue the app has, in the browser.

Field by field: the device's value beside the server's (and the value before, when the
server knows it: the record it held at the device's base version); keep one, or type
another; or dismiss. Deciding goes through the same domain code as `POST /v1/conflicts/…`
(server/records/conflicts.py): the merged fields become an ordinary change in the feed, the
conflict closes and the audit entry is written in one transaction, and the device hears
the outcome on its next pull.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.datastructures import FormData

from app.records import EDITABLE_FIELDS, ValidationError
from server.auth import AuthenticatedDevice
from server.console.render import page
from server.console.sessions import AdminUser, SignedIn, Visit, checked_form, console_state
from server.db.models import BIGINT_MAX
from server.records.conflicts import STATUSES, audit_entries, conflict_json, decide
from server.records.mutations import record_json
from server.wire import patch_fields

__all__ = ["console_actor", "router"]

router = APIRouter()
ConflictId = Annotated[int, Path(ge=1, le=BIGINT_MAX)]


def console_actor(visit: Visit) -> AuthenticatedDevice:
    """The office user as the deciding party the domain code records ("ada (console)")."""
    return AuthenticatedDevice(id=0, name=f"{visit.user.name} (console)", role="admin")


@router.get("/conflicts", response_class=HTMLResponse)
def conflicts_page(
    request: Request,
    visit: SignedIn,
    status: Annotated[str, Query(max_length=16)] = "open",
) -> HTMLResponse:
    state = console_state(request)
    chosen = status if status in STATUSES else "open"
    table, devices = state.store.tables.Conflict, state.store.tables.Device
    users = {row.id: row.user_name for row in devices.select(devices.id, devices.user_name)}
    rows = table.select().where(table.status == chosen).order_by(table.id)
    items = [
        {
            "conflict": conflict_json(row),
            "title": json.loads(row.server).get("title", ""),
            "user": users.get(row.device_id, ""),
            "fields": ", ".join(sorted(json.loads(row.mine))),
        }
        for row in rows
    ]
    return page(
        request,
        "conflicts.html",
        visit,
        {"title": "Conflicts", "items": items, "status": chosen, "statuses": STATUSES},
    )


def _fields(row: Any, current: dict[str, Any] | None) -> list[dict[str, Any]]:
    mine = json.loads(row.mine)
    snapshot = json.loads(row.server)
    # The device says what its edit started from; else the snapshot is it if unmoved.
    base = json.loads(row.base) if row.base else {}
    if not base and snapshot.get("version") == row.base_version:
        base = snapshot
    server = current or snapshot
    return [
        {
            "name": name,
            "before": base.get(name),
            "before_known": name in base,
            "mine": mine[name],
            "server": server.get(name),
        }
        for name in EDITABLE_FIELDS
        if name in mine
    ]


def _detail(
    request: Request, visit: Visit, conflict_id: int, *, error: str = "", status_code: int = 200
) -> HTMLResponse:
    state = console_state(request)
    table, records = state.store.tables.Conflict, state.store.tables.WorkOrder
    row = table.get_or_none(table.id == conflict_id)
    if row is None:
        return page(request, "missing.html", visit, {"title": "No such conflict"}, status_code=404)
    current = records.get_or_none(records.id == row.entity_id)
    record = record_json(current) if current is not None else None
    return page(
        request,
        "conflict.html",
        visit,
        {
            "title": f"Conflict {row.id}",
            "conflict": conflict_json(row),
            "record": record,
            "fields": _fields(row, record),
            "audit": audit_entries(state.store, row.id),
            "error": error,
        },
        status_code=status_code,
    )


@router.get("/conflicts/{conflict_id}", response_class=HTMLResponse)
def conflict_page(request: Request, visit: SignedIn, conflict_id: ConflictId) -> HTMLResponse:
    return _detail(request, visit, conflict_id)


def _typed(name: str, text: str) -> Any:
    """A typed value as the field's JSON type (the form sends text)."""
    if name == "deleted":
        return text.strip().lower() in ("true", "yes", "1")
    if name == "due_date":
        return text.strip() or None
    return text


def _merged(form: FormData, mine: dict[str, Any], server: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for name in mine:
        choice = form.get(f"choice_{name}")
        if choice == "device":
            merged[name] = mine[name]
        elif choice == "server":
            merged[name] = server.get(name)
        elif choice == "other":
            merged[name] = _typed(name, str(form.get(f"value_{name}") or ""))
        else:
            raise ValueError(f"{name}: choose the device's value, the server's, or type another")
    return merged


@router.post("/conflicts/{conflict_id}/resolve", response_class=HTMLResponse)
async def resolve(request: Request, visit: AdminUser, conflict_id: ConflictId) -> Response:
    form = await checked_form(request, visit)
    state = console_state(request)
    table, records = state.store.tables.Conflict, state.store.tables.WorkOrder
    row = table.get_or_none(table.id == conflict_id)
    current = None if row is None else records.get_or_none(records.id == row.entity_id)
    if row is None or current is None:
        return _detail(request, visit, conflict_id, status_code=404)
    try:
        merged = patch_fields(_merged(form, json.loads(row.mine), record_json(current)))
        base_version = int(str(form.get("base_version") or "0"))
    except ValidationError as error:
        words = "; ".join(
            f"{'.'.join(str(part) for part in item['loc'])}: {item['msg']}"
            for item in error.errors(include_url=False)
        )
        return _detail(request, visit, conflict_id, error=words, status_code=422)
    except ValueError as error:
        return _detail(request, visit, conflict_id, error=str(error), status_code=422)
    reply = decide(state.store, console_actor(visit), conflict_id, merged, base_version)
    return _after(request, visit, conflict_id, reply.status, reply.body)


@router.post("/conflicts/{conflict_id}/dismiss", response_class=HTMLResponse)
async def dismiss(request: Request, visit: AdminUser, conflict_id: ConflictId) -> Response:
    await checked_form(request, visit)
    state = console_state(request)
    reply = decide(state.store, console_actor(visit), conflict_id, None, None)
    return _after(request, visit, conflict_id, reply.status, reply.body)


def _after(
    request: Request, visit: Visit, conflict_id: int, status: int, body: dict[str, Any]
) -> Response:
    if status == 200:
        return RedirectResponse(f"/console/conflicts/{conflict_id}", status_code=303)
    words = {
        "conflict_not_open": "Someone already decided this conflict.",
        "version_conflict": "The work order changed meanwhile: look at the server's values again.",
        "not_found": "The work order is gone.",
    }.get(str(body.get("error")), f"Refused: {body.get('error')}")
    return _detail(request, visit, conflict_id, error=words, status_code=status)
