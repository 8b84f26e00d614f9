"""`GET /v1/records?q=`: finding work orders by text, beyond the device's own feed.

Search reaches every work order a device may read (server/access.py): for a worker the whole
organisation, or only its scope with `Settings.worker_search == "scope"`. Results are ordered
by id and paged by the last id (`next_cursor`), so a page boundary never depends on what
changed in between.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Query

from server.access import Action
from server.gate import gate_for
from server.http import ApiError, Context, CurrentDevice, declare
from server.openapi.answers import SearchPage, error_responses
from server.records.mutations import record_columns_json
from server.records.search import find_work_orders
from server.scope.pins import pinned_among
from server.scope.reads import device_scope
from server.wire import UrlInteger, wire_entity_id

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["scope"])

# app.records.printable's rule, tab and line breaks included: PostgreSQL refuses a NUL.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@router.get(
    "/records",
    dependencies=[declare(Action.SEARCH)],
    response_model=None,
    responses={200: {"model": SearchPage}, **error_responses(401, 429)},
)
def search_records(
    context: Context,
    device: CurrentDevice,
    q: Annotated[str, Query(min_length=1, max_length=200, description="Text to find")],
    limit: Annotated[int | None, Query(ge=1), UrlInteger] = None,
    cursor: Annotated[str | None, Query(description="`next_cursor` of the previous page")] = None,
) -> dict[str, Any]:
    """Work orders (not deleted) whose title, site or assignee contains `q`, any case."""
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
    gate = gate_for(context, device)
    # The rule's reach as a query: a scoped worker finds only what its scope holds.
    rows = find_work_orders(store, q, after, page_size + 1, scope if gate.scoped else None)
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
    gate.sent({record["id"]: record["version"] for record in records})
    gate.flush()
    return {"records": records, "next_cursor": rows[-1]["id"] if has_more else None}
