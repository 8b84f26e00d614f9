"""Attachment bytes over HTTP: `GET /v1/attachments/{id}` (`ETag: "<sha256>"`, ranges, 304),
its thumbnail, and `DELETE` (keyed like a mutation, `Idempotency-Key`)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Header, Response
from fastapi.responses import StreamingResponse

from server.access import Action
from server.db.idempotency import IdempotentCall, Reply, execute_idempotent, request_hash
from server.db.models import Attachment
from server.db.store import ChangeSequence
from server.gate import Gate, enforce, gate_for
from server.http import (
    ApiError,
    Context,
    CurrentDevice,
    IdempotencyKeyHeader,
    ServerContext,
    declare,
    reply_response,
)
from server.openapi.uploads import ATTACHMENT_RESPONSES, REMOVE_RESPONSES, THUMBNAIL_RESPONSES
from server.uploads.attachments import order_of
from server.uploads.attachments import remove_attachment as remove
from server.wire import wire_entity_id

__all__ = ["etag_matches", "router"]

router = APIRouter(prefix="/v1", tags=["attachments"])

_PIECE = 256 * 1024
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def _live(context: ServerContext, gate: Gate, attachment_id: str) -> Attachment:
    """A live attachment the device may read the bytes of (the rule asks of its work order)."""
    canonical = wire_entity_id(attachment_id)
    table = context.store.tables.Attachment
    row: Attachment | None = None
    if canonical is not None:
        row = table.get_or_none(table.id == canonical)
    if row is None or row.deleted:
        raise ApiError(404, {"error": "not_found"})
    enforce(gate.order(Action.READ_FILE, row.entity_id, order_of(context.store, row)))
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
            dependencies=[declare(Action.READ_FILE)], responses=ATTACHMENT_RESPONSES)  # fmt: skip
def get_attachment(
    context: Context,
    device: CurrentDevice,
    attachment_id: str,
    range_header: Annotated[str | None, Header(alias="Range")] = None,
    if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
    if_range: Annotated[str | None, Header(alias="If-Range")] = None,
) -> Response:
    """The attachment's bytes (`Range` for a part of them)."""
    row = _live(context, gate_for(context, device), attachment_id)
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
            dependencies=[declare(Action.READ_FILE)], responses=THUMBNAIL_RESPONSES)  # fmt: skip
def get_thumbnail(
    context: Context,
    device: CurrentDevice,
    attachment_id: str,
    if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
) -> Response:
    """A JPEG of an image attachment, at most 256 px, made once and cached."""
    row = _live(context, gate_for(context, device), attachment_id)
    etag = f'"{row.sha256}-256.jpg"'
    headers = {"ETag": etag, "Cache-Control": "private"}
    if etag_matches(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    path = context.blobs.thumbnail(row.sha256) if row.content_type.startswith("image/") else None
    if path is None:
        detail = "no thumbnail: not an image this server can read"
        raise ApiError(415, {"error": "unsupported_media_type", "detail": detail})
    return Response(path.read_bytes(), media_type="image/jpeg", headers=headers)


@router.delete(
    "/attachments/{attachment_id}",
    dependencies=[declare(Action.DETACH)],
    responses=REMOVE_RESPONSES,
)
def remove_attachment(
    context: Context,
    device: CurrentDevice,
    idempotency_key: IdempotencyKeyHeader,
    attachment_id: str,
) -> Response:
    """Remove an attachment, at most once per (device, Idempotency-Key); a tombstone stays in
    the changes feed (removing a removed one answers its tombstone again)."""
    canonical = wire_entity_id(attachment_id)
    if canonical is None:
        raise ApiError(404, {"error": "not_found"})

    gate = gate_for(context, device)

    def effect(sequence: ChangeSequence) -> Reply:
        return remove(context.store, gate, canonical, device.name, sequence)

    call = IdempotentCall(idempotency_key, request_hash("remove_attachment", canonical), effect)
    [reply] = execute_idempotent(context.store, device.id, [call], context.settings)
    return reply_response(reply)
