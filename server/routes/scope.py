"""Who am I, finding other work, and pins: `GET /v1/me`, `GET /v1/records?q=`, `/v1/pins/{id}`.

Search reaches every work order a device may read: for a worker the whole organisation, or
only its scope with `Settings.worker_search == "scope"` (then a single read outside the scope
is a 404 too). Results are ordered by id and paged by the last id (`next_cursor`), so a page
boundary never depends on what changed in between.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from server.auth import AuthenticatedDevice
from server.db.models import WorkOrderRow
from server.http import ApiError, CurrentDevice, ServerContext
from server.openapi.answers import Identity, PinReply, SearchPage, error_responses
from server.records.mutations import record_columns_json
from server.records.search import find_work_orders
from server.scope.feed import pinned_among
from server.scope.keys import Scope
from server.scope.pins import set_pin
from server.wire import UrlInteger, wire_entity_id

__all__ = ["device_scope", "may_read", "router"]

router = APIRouter(prefix="/v1", tags=["scope"])

# app.records.printable's rule, tab and line breaks included: PostgreSQL refuses a NUL.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def device_scope(device: AuthenticatedDevice) -> Scope:
    return Scope(device.id, device.user, device.team, admin=device.sees_everything)


def _restricted(context: ServerContext, device: AuthenticatedDevice) -> bool:
    return not device.sees_everything and context.settings.worker_search == "scope"


def may_read(context: ServerContext, device: AuthenticatedDevice, row: WorkOrderRow) -> bool:
    """Whether the device may read this work order outside its feed."""
    if not _restricted(context, device):
        return True
    pinned = bool(pinned_among(context.store, device.user, [row.id]))
    return device_scope(device).holds(
        {"assignee": row.assignee, "team": row.team, "created_by": row.created_by}, pinned
    )


@router.get("/me", responses={200: {"model": Identity}, **error_responses(401, 429, invalid=None)})
def me(device: CurrentDevice) -> dict[str, str]:
    """This device: its name, the person using it, their team and the device's role."""
    return {"device": device.name, "user": device.user, "team": device.team, "role": device.role}


@router.get(
    "/records",
    response_model=None,
    responses={200: {"model": SearchPage}, **error_responses(401, 429)},
)
def search_records(
    request: Request,
    device: CurrentDevice,
    q: Annotated[str, Query(min_length=1, max_length=200, description="Text to find")],
    limit: Annotated[int | None, Query(ge=1), UrlInteger] = None,
    cursor: Annotated[str | None, Query(description="`next_cursor` of the previous page")] = None,
) -> dict[str, Any]:
    """Work orders (not deleted) whose title, site or assignee contains `q`, any case."""
    context: ServerContext = request.app.state.server
    store, settings = context.store, context.settings
    after = ""
    if cursor:
        canonical = wire_entity_id(cursor)
        if canonical is None:
            raise ApiError(422, {"error": "invalid_payload", "detail": "cursor: not a cursor"})
        after = canonical
    if not q.strip() or _CONTROL.search(q):
        detail = "q: must not be blank or contain control characters"
        raise ApiError(422, {"error": "invalid_payload", "detail": detail})
    page_size = min(limit or settings.search_default_limit, settings.search_max_limit)
    scope = device_scope(device)
    rows = find_work_orders(
        store, q, after, page_size + 1, scope if _restricted(context, device) else None
    )
    has_more = len(rows) > page_size
    rows = rows[:page_size]
    pinned = pinned_among(store, device.user, [row["id"] for row in rows])
    records = [
        {
            **record_columns_json(row),
            "pinned": row["id"] in pinned,
            "in_scope": scope.holds(row, row["id"] in pinned),
        }
        for row in rows
    ]
    return {"records": records, "next_cursor": rows[-1]["id"] if has_more else None}


def _pin(request: Request, device: AuthenticatedDevice, entity_id: str, on: bool) -> Any:
    context: ServerContext = request.app.state.server
    canonical = wire_entity_id(entity_id)
    table = context.store.tables.WorkOrder
    row = table.get_or_none(table.id == canonical) if canonical else None
    if row is None or (on and not may_read(context, device, row)):
        raise ApiError(404, {"error": "not_found"})
    if not set_pin(context.store, device.user, row.id, on):
        raise ApiError(404, {"error": "not_found"})
    return {"id": row.id, "pinned": on}


_PIN_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": PinReply},
    **error_responses(401, 404, 429),
}


@router.post("/pins/{entity_id}", responses=_PIN_RESPONSES)
def pin(request: Request, device: CurrentDevice, entity_id: str) -> Any:
    """Keep a work order on every device of this person ("Keep offline"); idempotent."""
    return _pin(request, device, entity_id, True)


@router.delete("/pins/{entity_id}", responses=_PIN_RESPONSES)
def unpin(request: Request, device: CurrentDevice, entity_id: str) -> Any:
    """Stop keeping it (it stays while another rule holds it); idempotent."""
    return _pin(request, device, entity_id, False)
