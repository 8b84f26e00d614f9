"""The changes feed and single-record reads.

`GET /v1/changes?since=<token>` pages through work orders in the order of their last change.
A device sees only its scope (server/scope/keys.py, server/scope/feed.py).
The token is the change sequence number of the last position read (a decimal string, opaque
to clients). Pages stop at the horizon of `Store.horizon` (server/db/store.py), below which no
number can still commit: a page can never be followed by a lower number committing late, and
paging neither skips nor repeats a change. A record changed again after it was paged
moves to a higher number and is delivered again with its new version (the feed carries the
latest state of each record, tombstones included).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response
from fastapi.responses import JSONResponse

from server.access import Action
from server.db.models import BIGINT_MAX
from server.devices.status import STATUS_DESCRIPTION, STATUS_HEADER, note_pull
from server.gate import enforce, gate_for
from server.http import ApiError, Context, CurrentDevice, declare
from server.openapi.answers import ChangesPage, RecordRead, error_responses
from server.records.mutations import record_json
from server.routes.attachments import etag_matches
from server.scope.echoes import INSTALL_DESCRIPTION, INSTALL_HEADER, note_install
from server.scope.feed import feed_page
from server.scope.prune import note_feed_position
from server.scope.reads import device_scope
from server.uploads.attachments import attachments_of, with_attachments
from server.wire import UrlInteger, wire_entity_id

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["records"])

#: Windows of `limit` positions one request reads on while they hold nothing to send.
_EMPTY_WINDOWS = 10

_ETAG = {
    "ETag": {"description": 'The record\'s version, quoted: `"3"`', "schema": {"type": "string"}}
}


def _parse_since(since: str | None) -> int:
    if since is None or since == "":
        return 0
    # isdigit() alone admits "²" and other digits int() refuses.
    if not (since.isascii() and since.isdigit()) or len(since) > 19 or int(since) > BIGINT_MAX:
        raise ApiError(422, {"error": "invalid_payload", "detail": "since: not a change token"})
    return int(since)


@router.get(
    "/changes",
    dependencies=[declare(Action.PULL)],
    response_model=None,
    responses={200: {"model": ChangesPage}, **error_responses(401, 429)},
)
def get_changes(
    context: Context,
    device: CurrentDevice,
    since: Annotated[str | None, Query(description="`next` of the previous page")] = None,
    limit: Annotated[int | None, Query(ge=1), UrlInteger] = None,
    device_status: Annotated[
        str | None, Header(alias=STATUS_HEADER, description=STATUS_DESCRIPTION)
    ] = None,
    install: Annotated[
        str | None, Header(alias=INSTALL_HEADER, description=INSTALL_DESCRIPTION)
    ] = None,
) -> dict[str, Any]:
    """Records changed after `since` in the device's scope, oldest change first; a work order
    that left the scope comes once as `{"id": …, "out_of_scope": true}`. With
    `Fieldsync-Install`, what this install wrote itself (and holds from the replies) is left
    out; `next` still passes it."""
    after = _parse_since(since)
    settings = context.settings
    page_size = min(limit or settings.changes_default_limit, settings.changes_max_limit)
    # Asking from `after` says the device holds everything up to it: pruning may pass it.
    note_feed_position(context.store, device.id, after, device.feed_position)
    # From `since=0` an install holds only what it wrote itself: that is still left out.
    echoes = note_install(context.store, device, install)
    scope = device_scope(device)
    page = feed_page(context.store, scope, after, page_size, echoes)
    for _ in range(_EMPTY_WINDOWS - 1):
        # A window of nothing but the device's own writes: read on, so that draining 20,000
        # offline creates costs a few requests, not one per window.
        if page["changes"] or "attachments" in page or not page["has_more"]:
            break
        page = feed_page(context.store, scope, int(page["next"]), page_size, echoes)
    now = settings.clock()
    note_pull(context.store, device.id, now, device_status, complete=not page["has_more"])
    gate = gate_for(context, device)
    gate.sent([(c["id"], c["version"]) for c in page["changes"] if not c.get("out_of_scope")])
    gate.flush()
    return page


@router.get(
    "/records/{entity_id}",
    dependencies=[declare(Action.READ)],
    responses={
        200: {"model": RecordRead, "headers": _ETAG},
        304: {"description": "ETag matched", "headers": _ETAG},
        **error_responses(401, 404, 429),
    },
)
def get_record(
    context: Context,
    device: CurrentDevice,
    entity_id: str,
    if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
) -> Response:
    """One work order (tombstones included) with `ETag: "<version>"`."""
    canonical = wire_entity_id(entity_id)
    table = context.store.tables.WorkOrder
    row = table.get_or_none(table.id == canonical) if canonical else None
    gate = gate_for(context, device)
    enforce(gate.order(Action.READ, canonical or "", row))
    assert row is not None
    gate.sent({row.id: row.version})
    gate.flush()
    etag = f'"{row.version}"'
    if etag_matches(if_none_match, etag):
        return Response(status_code=304, headers={"ETag": etag})
    record = with_attachments(record_json(row), attachments_of(context.store, [row.id]))
    return JSONResponse({"record": record}, headers={"ETag": etag})
