"""The changes feed and single-record reads.

`GET /v1/changes?since=<token>` pages through work orders in the order of their last change.
The token is the change sequence number of the last record returned (a decimal string, opaque
to clients). Sequence numbers come from `Store.write_transaction`, which serializes writers, so
they become visible in commit order: a page can never be followed by a lower number committing
late, and paging neither skips nor repeats a change. A record changed again after it was paged
moves to a higher number and is delivered again with its new version (the feed carries the
latest state of each record, tombstones included).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from server.attachments import (
    attachment_changes,
    attachments_of,
    etag_matches,
    with_attachments,
)
from server.http import ApiError, CurrentDevice, ServerContext
from server.models import BIGINT_MAX
from server.mutations import record_json
from server.openapi import ChangesPage, RecordRead, error_responses
from server.uploads import attachment_change_json
from server.wire import UrlInteger, wire_entity_id

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["records"])

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
    response_model=None,
    responses={200: {"model": ChangesPage}, **error_responses(401, 429)},
)
def get_changes(
    request: Request,
    device: CurrentDevice,
    since: Annotated[str | None, Query(description="`next` of the previous page")] = None,
    limit: Annotated[int | None, Query(ge=1), UrlInteger] = None,
) -> dict[str, Any]:
    """Records changed after `since`, oldest change first."""
    context: ServerContext = request.app.state.server
    after = _parse_since(since)
    settings = context.settings
    page_size = min(limit or settings.changes_default_limit, settings.changes_max_limit)
    table = context.store.tables.WorkOrder
    rows = list(table.select().where(table.seq > after).order_by(table.seq).limit(page_size + 1))
    # Work orders and attachments number their changes from one counter: one sequence.
    files = attachment_changes(context.store, after, page_size + 1)
    seqs = sorted([int(row.seq) for row in rows] + [int(row.seq) for row in files])
    has_more = len(seqs) > page_size
    last = seqs[page_size - 1] if has_more else (seqs[-1] if seqs else after)
    rows = [row for row in rows if row.seq <= last]
    files = [row for row in files if row.seq <= last]
    listed = attachments_of(context.store, [row.id for row in rows])
    page: dict[str, Any] = {
        "changes": [with_attachments(record_json(row), listed) for row in rows],
        "next": str(last),
        "has_more": has_more,
    }
    if files:  # left out when there are none: the page keeps its shape for older clients
        page["attachments"] = [attachment_change_json(row) for row in files]
    return page


@router.get(
    "/records/{entity_id}",
    responses={
        200: {"model": RecordRead, "headers": _ETAG},
        304: {"description": "ETag matched", "headers": _ETAG},
        **error_responses(401, 404, 429),
    },
)
def get_record(
    request: Request,
    device: CurrentDevice,
    entity_id: str,
    if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
) -> Response:
    """One work order (tombstones included) with `ETag: "<version>"`."""
    context: ServerContext = request.app.state.server
    canonical = wire_entity_id(entity_id)
    if canonical is None:
        raise ApiError(404, {"error": "not_found"})
    table = context.store.tables.WorkOrder
    row = table.get_or_none(table.id == canonical)
    if row is None:
        raise ApiError(404, {"error": "not_found"})
    etag = f'"{row.version}"'
    if etag_matches(if_none_match, etag):
        return Response(status_code=304, headers={"ETag": etag})
    record = with_attachments(record_json(row), attachments_of(context.store, [row.id]))
    return JSONResponse({"record": record}, headers={"ETag": etag})
