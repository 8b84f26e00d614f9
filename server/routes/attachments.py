"""Attachments of work orders: their place on records and in the changes feed, their bytes
(`ETag: "<sha256>"`, ranges, 304), thumbnails, and their removal.

An attachment has a change number of its own from the same counter as work orders, so the
feed orders both in one sequence and an attachment never moves its work order's version (it
cannot conflict with a field edit). Removing one is keyed like a mutation (`Idempotency-Key`,
`server.db.idempotency`) and leaves a tombstone in the feed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import StreamingResponse

from server.db.idempotency import IdempotentCall, Reply, execute_idempotent, request_hash
from server.db.models import Attachment
from server.db.store import ChangeSequence, Store
from server.http import ApiError, CurrentDevice, IdempotencyKeyHeader, ServerContext, reply_response
from server.openapi.uploads import ATTACHMENT_RESPONSES, REMOVE_RESPONSES, THUMBNAIL_RESPONSES
from server.records.mutations import now_iso
from server.uploads.lifecycle import attachment_change_json, attachment_json
from server.wire import wire_entity_id

__all__ = ["attachment_changes", "attachments_of", "etag_matches", "router", "with_attachments"]

router = APIRouter(prefix="/v1", tags=["attachments"])

_PIECE = 256 * 1024
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def attachments_of(store: Store, entity_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """The live attachments of these work orders, oldest first, by work order id. A work
    order that never had one is left out: its record keeps the shape it had before
    attachments existed (`attachments` appears once there is, or was, one)."""
    table = store.tables.Attachment
    listed: dict[str, list[dict[str, Any]]] = {}
    ids = list(dict.fromkeys(entity_ids))
    for start in range(0, len(ids), 500):
        query = (
            table.select().where(table.entity_id.in_(ids[start : start + 500])).order_by(table.seq)
        )
        for row in query:
            found = listed.setdefault(row.entity_id, [])
            if not row.deleted:
                found.append(attachment_json(row))
    return listed


def with_attachments(
    record: dict[str, Any], listed: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """`record` plus its `attachments` list, if it has (or had) any."""
    if record["id"] in listed:
        return {**record, "attachments": listed[record["id"]]}
    return record


def attachment_changes(store: Store, after: int, limit: int) -> list[Attachment]:
    """Attachments (tombstones included) whose last change comes after `after`."""
    table = store.tables.Attachment
    return list(table.select().where(table.seq > after).order_by(table.seq).limit(limit))


def _live(context: ServerContext, attachment_id: str) -> Attachment:
    canonical = wire_entity_id(attachment_id)
    table = context.store.tables.Attachment
    row: Attachment | None = None
    if canonical is not None:
        row = table.get_or_none(table.id == canonical)
    if row is None or row.deleted:
        raise ApiError(404, {"error": "not_found"})
    return row


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """Whether `If-None-Match` names `etag` (weak or strong) or `*`."""
    if if_none_match is None:
        return False
    candidates = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
    return etag in candidates or "*" in candidates


def _unsatisfiable(size: int) -> ApiError:
    return ApiError(416, {"error": "range_not_satisfiable"}, {"Content-Range": f"bytes */{size}"})


def _byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The one range `Range` asks for as (first, last), None to send the whole file (no
    header, several ranges, or one this server does not read: RFC 9110 lets it ignore them);
    416 if it starts past the end."""
    found = _RANGE.match(header.strip()) if header else None
    if found is None or not any(found.groups()):
        return None
    first_text, last_text = found.groups()
    if not first_text:  # the last N bytes
        count = int(last_text)
        if count == 0:
            raise _unsatisfiable(size)
        return max(0, size - count), size - 1
    first = int(first_text)
    if first >= size:
        raise _unsatisfiable(size)
    last = min(int(last_text), size - 1) if last_text else size - 1
    return None if last < first else (first, last)


def _pieces(fd: int, first: int, count: int) -> Iterator[bytes]:
    try:
        os.lseek(fd, first, os.SEEK_SET)
        while count > 0:
            piece = os.read(fd, min(_PIECE, count))
            if not piece:
                return
            count -= len(piece)
            yield piece
    finally:
        os.close(fd)


@router.get("/attachments/{attachment_id}", response_class=Response,
            responses=ATTACHMENT_RESPONSES)  # fmt: skip
def get_attachment(
    request: Request,
    device: CurrentDevice,
    attachment_id: str,
    range_header: Annotated[str | None, Header(alias="Range")] = None,
    if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
    if_range: Annotated[str | None, Header(alias="If-Range")] = None,
) -> Response:
    """The attachment's bytes (`Range` for a part of them)."""
    context: ServerContext = request.app.state.server
    row = _live(context, attachment_id)
    etag = f'"{row.sha256}"'
    headers = {"ETag": etag, "Accept-Ranges": "bytes", "Cache-Control": "private"}
    if etag_matches(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    wanted = None if if_range not in (None, etag) else _byte_range(range_header, row.size)
    try:
        fd = os.open(context.blobs.blob_path(row.sha256), os.O_RDONLY)
    except FileNotFoundError:
        raise ApiError(404, {"error": "not_found"}) from None
    first, last = wanted if wanted is not None else (0, row.size - 1)
    headers["Content-Length"] = str(last - first + 1)
    status = 200
    if wanted is not None:
        status = 206
        headers["Content-Range"] = f"bytes {first}-{last}/{row.size}"
    return StreamingResponse(
        _pieces(fd, first, last - first + 1),
        status_code=status,
        media_type=row.content_type,
        headers=headers,
    )


@router.get("/attachments/{attachment_id}/thumbnail", response_class=Response,
            responses=THUMBNAIL_RESPONSES)  # fmt: skip
def get_thumbnail(
    request: Request,
    device: CurrentDevice,
    attachment_id: str,
    if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
) -> Response:
    """A JPEG of an image attachment, at most 256 px, made once and cached."""
    context: ServerContext = request.app.state.server
    row = _live(context, attachment_id)
    etag = f'"{row.sha256}-256.jpg"'
    headers = {"ETag": etag, "Cache-Control": "private"}
    if etag_matches(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    path = context.blobs.thumbnail(row.sha256) if row.content_type.startswith("image/") else None
    if path is None:
        detail = "no thumbnail: not an image this server can read"
        raise ApiError(415, {"error": "unsupported_media_type", "detail": detail})
    return Response(path.read_bytes(), media_type="image/jpeg", headers=headers)


def _remove(store: Store, attachment_id: str, device_name: str, sequence: ChangeSequence) -> Reply:
    table = store.tables.Attachment
    row: Attachment | None = table.get_or_none(table.id == attachment_id)
    if row is None:
        return Reply(404, {"error": "not_found"})
    if not row.deleted:
        row.deleted, row.deleted_at, row.deleted_by = True, now_iso(), device_name
        row.seq = sequence.next()
        table.update(
            deleted=True, deleted_at=row.deleted_at, deleted_by=device_name, seq=row.seq
        ).where(table.id == row.id).execute()
    return Reply(200, {"attachment": attachment_change_json(row)})


@router.delete("/attachments/{attachment_id}", responses=REMOVE_RESPONSES)
def remove_attachment(
    request: Request,
    device: CurrentDevice,
    idempotency_key: IdempotencyKeyHeader,
    attachment_id: str,
) -> Response:
    """Remove an attachment, at most once per (device, Idempotency-Key); a tombstone stays in
    the changes feed (removing a removed one answers its tombstone again)."""
    context: ServerContext = request.app.state.server
    canonical = wire_entity_id(attachment_id)
    if canonical is None:
        raise ApiError(404, {"error": "not_found"})

    def effect(sequence: ChangeSequence) -> Reply:
        return _remove(context.store, canonical, device.name, sequence)

    call = IdempotentCall(idempotency_key, request_hash("remove_attachment", canonical), effect)
    [reply] = execute_idempotent(context.store, device.id, [call], context.settings)
    return reply_response(reply)
