"""tus 1.0.0 under `/v1/uploads`: core protocol plus creation, creation-with-upload, checksum
(sha256), termination and expiration.

Every request on an upload holds its lock (server/uploads/locks.py), so HEAD answers only
what a PATCH still being stored has recorded; the body goes into the partial file as
server/uploads/receive.py says. Implemented here rather than with `tuspyserver`: that
router keeps its state in JSON files beside the bytes and has no checksum extension, while an
upload here is keyed by the device's `attachment_id`, owned by one device, and completes into
a database row of the work order in the same write transaction as its change number.
"""

from __future__ import annotations

import base64
import binascii
import email.utils
import hashlib
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from server.access import Action
from server.auth import AuthenticatedDevice
from server.db.models import BIGINT_MAX, Upload
from server.gate import enforce, gate_for
from server.http import ApiError, Context, CurrentDevice, ServerContext, declare
from server.openapi.uploads import (
    DELETE_RESPONSES,
    HEAD_RESPONSES,
    OPTIONS_RESPONSES,
    PATCH_RESPONSES,
    POST_RESPONSES,
)
from server.uploads.lifecycle import (
    create_or_resume,
    own_upload,
    parse_upload_request,
    terminate_held_upload,
)
from server.uploads.receive import BodyCut, Chunk, Uploads, complete_empty, receive_body
from server.wire import UrlInteger

__all__ = ["TUS_EXTENSIONS", "TUS_VERSION", "router"]

router = APIRouter(prefix="/v1", tags=["uploads"])

TUS_VERSION = "1.0.0"
TUS_EXTENSIONS = "creation,creation-with-upload,checksum,termination,expiration"
_OFFSET_STREAM = "application/offset+octet-stream"


def _tus_resumable(
    tus_resumable: Annotated[str | None, Header(alias="Tus-Resumable")] = None,
) -> None:
    if tus_resumable != TUS_VERSION:
        raise ApiError(412, {"error": "unsupported_tus_version"}, {"Tus-Version": TUS_VERSION})


TusResumable = Annotated[None, Depends(_tus_resumable)]


def _http_date(epoch: float) -> str:
    return email.utils.formatdate(epoch, usegmt=True)


def _state_headers(row: Upload) -> dict[str, str]:
    headers = {"Upload-Offset": str(row.offset), "Cache-Control": "no-store"}
    if not row.complete:
        headers["Upload-Expires"] = _http_date(row.expires_at)
    return headers


def _own_upload(context: ServerContext, device: AuthenticatedDevice, upload_id: str) -> Upload:
    """The device's upload (the access rule hides another device's, as a missing one)."""
    table = context.store.tables.Upload
    found: Upload | None = table.get_or_none(table.id == upload_id)
    owner = found.device_id if found is not None else None
    enforce(gate_for(context, device).owned(Action.UPLOAD, owner))
    return own_upload(context.store, context.blobs, context.settings, device.id, upload_id)


def _uploads(context: ServerContext) -> Uploads:
    return Uploads(context.store, context.blobs, context.hashes, context.locks, context.settings)


def _arrived(request: Request) -> float:
    """When the request arrived (a later request on an upload may take it over)."""
    return float(getattr(request.state, "arrived_at", 0.0))


def _checksum(header: str | None) -> bytes | None:
    """The digest an `Upload-Checksum: sha256 <base64>` announces (400 if unusable)."""
    if header is None:
        return None
    algorithm, _, encoded = header.strip().partition(" ")
    if algorithm.lower() != "sha256":
        raise ApiError(
            400, {"error": "invalid_checksum", "detail": "Tus-Checksum-Algorithm: sha256"}
        )
    try:
        digest = base64.b64decode(encoded.strip(), validate=True)
    except binascii.Error:
        digest = b""
    if len(digest) != hashlib.sha256().digest_size:
        raise ApiError(400, {"error": "invalid_checksum", "detail": "not a base64 sha256"})
    return digest


class _Body:
    """The request body as a chunk's pieces: a cut connection is `BodyCut`, not Starlette's."""

    def __init__(self, request: Request) -> None:
        self._pieces = request.stream().__aiter__()

    def __aiter__(self) -> _Body:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self._pieces.__anext__()
        except ClientDisconnect:
            raise BodyCut() from None


async def _receive(
    request: Request, context: ServerContext, device_name: str, row: Upload, claimed: int
) -> Upload:
    """The request body appended at `claimed` (the offset the client says it sends from)."""
    expected = _checksum(request.headers.get("upload-checksum"))
    declared = request.headers.get("content-length")
    chunk = Chunk(
        claimed=claimed,
        declared=int(declared) if declared and declared.isdigit() else None,
        expected=expected,
        arrived=_arrived(request),
        pieces=_Body(request),
    )
    return await receive_body(_uploads(context), device_name, row, chunk)


@router.options(
    "/uploads",
    status_code=204,
    response_class=Response,
    dependencies=[declare(Action.UPLOAD_INFO)],
    responses=OPTIONS_RESPONSES,
)
def upload_options(context: Context) -> Response:
    """What this tus server supports (no authentication needed)."""
    settings = context.settings
    return Response(
        status_code=204,
        headers={
            "Tus-Resumable": TUS_VERSION,
            "Tus-Version": TUS_VERSION,
            "Tus-Max-Size": str(settings.max_upload_bytes),
            "Tus-Extension": TUS_EXTENSIONS,
            "Tus-Checksum-Algorithm": "sha256",
        },
    )


@router.post("/uploads", status_code=201, response_class=Response,
             dependencies=[declare(Action.ATTACH)], responses=POST_RESPONSES)  # fmt: skip
async def create_upload(
    request: Request,
    context: Context,
    device: CurrentDevice,
    tus: TusResumable,
    upload_length: Annotated[str | None, Header(alias="Upload-Length")] = None,
    upload_metadata: Annotated[str | None, Header(alias="Upload-Metadata")] = None,
) -> Response:
    """Create the upload of one attachment, or find it again by its `attachment_id`."""
    wanted = parse_upload_request(upload_length, upload_metadata, context.settings)
    gate = gate_for(context, device)
    row = await run_in_threadpool(
        create_or_resume, context.store, context.blobs, context.settings, device, wanted, gate
    )
    if row.length == 0 and not row.complete:
        await run_in_threadpool(complete_empty, _uploads(context), device.name, row)
    elif _media(request) == _OFFSET_STREAM and row.offset == 0 and not row.complete:
        row = await _receive(request, context, device.name, row, 0)
    return Response(
        status_code=201, headers={"Location": f"/v1/uploads/{row.id}", **_state_headers(row)}
    )


def _media(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


@router.head("/uploads/{upload_id}", response_class=Response,
             dependencies=[declare(Action.UPLOAD)], responses=HEAD_RESPONSES)  # fmt: skip
async def upload_offset(
    request: Request, context: Context, device: CurrentDevice, tus: TusResumable, upload_id: str
) -> Response:
    """Where to resume: `Upload-Offset` of `Upload-Length` bytes, once a PATCH still being
    stored (a cut one) has recorded what it received."""
    row = await run_in_threadpool(_own_upload, context, device, upload_id)
    if not row.complete:
        async with context.locks.hold(row.id, _arrived(request)):
            row = await run_in_threadpool(_own_upload, context, device, upload_id)
    headers = {**_state_headers(row), "Upload-Length": str(row.length)}
    return Response(status_code=200, headers=headers)


@router.patch("/uploads/{upload_id}", status_code=204, response_class=Response,
              dependencies=[declare(Action.UPLOAD)], responses=PATCH_RESPONSES)  # fmt: skip
async def append_chunk(
    request: Request,
    context: Context,
    device: CurrentDevice,
    tus: TusResumable,
    upload_id: str,
    upload_offset: Annotated[int, Header(alias="Upload-Offset", ge=0, le=BIGINT_MAX), UrlInteger],
    upload_checksum: Annotated[str | None, Header(alias="Upload-Checksum")] = None,
) -> Response:
    """Append the body at `Upload-Offset`; answers the new offset."""
    if _media(request) != _OFFSET_STREAM:
        raise ApiError(415, {"error": "unsupported_media_type", "detail": _OFFSET_STREAM})
    row = await run_in_threadpool(_own_upload, context, device, upload_id)
    _checksum(upload_checksum)
    row = await _receive(request, context, device.name, row, upload_offset)
    return Response(status_code=204, headers=_state_headers(row))


@router.delete("/uploads/{upload_id}", status_code=204, response_class=Response,
               dependencies=[declare(Action.UPLOAD)], responses=DELETE_RESPONSES)  # fmt: skip
async def terminate(
    request: Request, context: Context, device: CurrentDevice, tus: TusResumable, upload_id: str
) -> Response:
    """Give up an unfinished upload: its bytes are removed (a finished one is an attachment)."""
    row = await run_in_threadpool(_own_upload, context, device, upload_id)
    async with context.locks.hold(row.id, _arrived(request)):
        removed = await run_in_threadpool(terminate_held_upload, context.store, context.blobs, row)
    if not removed:
        raise ApiError(409, {"error": "upload_complete"})
    context.hashes.forget(row.id)
    return Response(status_code=204)
