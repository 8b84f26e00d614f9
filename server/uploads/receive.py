"""A tus PATCH body into its upload's partial file, under the upload's lock.

The body is streamed into the file as it arrives (memory stays flat) and fsynced before the
offset moves; a connection cut mid-body keeps what arrived, unless the chunk carried
`Upload-Checksum` (what arrived cannot be checked, so it is dropped). The chunk that brings
the last byte is accepted only if the whole file matches the announced sha256; otherwise the
upload starts again at 0. A wrong offset is refused before a byte of the body is read, and a
later request on the upload (the client reconnected) makes a silent body let go
(server/uploads/locks.py). Writing stops at the free-disk floor (server/uploads/budgets.py).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import os
from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from server.db.models import Upload
from server.http import ApiError, ServerContext
from server.uploads.blobs import UploadBusy, file_sha256
from server.uploads.budgets import free_disk_bytes, insufficient_storage
from server.uploads.lifecycle import complete_upload, find_upload, move_offset
from server.uploads.locks import HeldUpload, UploadLocked

__all__ = ["arrived", "checksum_mismatch", "parse_checksum", "receive_body"]


def arrived(request: Request) -> float:
    """When the request arrived (a later request on an upload may take it over)."""
    return float(getattr(request.state, "arrived_at", 0.0))


def parse_checksum(header: str | None) -> bytes | None:
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


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


#: Body bytes hashed per hand-over to the worker thread: large enough that the hand-over costs
#: nothing beside the hashing, small enough that memory stays flat.
_HASH_BATCH = 1 << 20


class _BackgroundHashes:
    """The sha256 updates of a body (the chunk's, the whole file's), in a worker thread a
    batch at a time and in order, while the event loop receives the next batch: hashing
    releases the GIL, so it runs beside the receiving instead of after it. A request that
    ends early abandons its batch harmlessly (it touches only these hash objects)."""

    def __init__(self, digests: list[Any]) -> None:
        self.digests = digests
        self._batch: list[bytes] = []
        self._size = 0
        self._pending: asyncio.Future[None] | None = None

    async def update(self, piece: bytes) -> None:
        if not self.digests:
            return
        self._batch.append(piece)
        self._size += len(piece)
        if self._size >= _HASH_BATCH:
            await self._hand_over()

    async def finish(self) -> None:
        """Every byte given so far is in the digests."""
        await self._hand_over()
        if self._pending is not None:
            await self._pending
            self._pending = None

    async def _hand_over(self) -> None:
        if self._pending is not None:
            await self._pending
            self._pending = None
        if self._batch:
            batch, self._batch, self._size = self._batch, [], 0
            loop = asyncio.get_running_loop()
            self._pending = loop.run_in_executor(None, self._hash, batch)

    def _hash(self, batch: list[bytes]) -> None:
        for digest in self.digests:
            for piece in batch:
                digest.update(piece)


def checksum_mismatch(detail: str) -> ApiError:
    return ApiError(460, {"error": "checksum_mismatch", "detail": detail})


async def receive_body(
    request: Request, context: ServerContext, device_name: str, row: Upload, claimed: int
) -> Upload:
    """Append the request body at `claimed` (the offset the client says it sends from), under
    the upload's lock; a wrong offset is refused before a byte of the body is read."""
    expected = parse_checksum(request.headers.get("upload-checksum"))
    declared = request.headers.get("content-length")
    try:
        async with context.locks.hold(row.id, arrived(request)) as held:
            with context.blobs.writing(row.id) as fd:
                current = await run_in_threadpool(find_upload, context.store, row.device_id, row.id)
                if current is None:
                    raise ApiError(404, {"error": "not_found"}, _UNREAD)
                if claimed != current.offset or current.complete:
                    headers = {"Upload-Offset": str(current.offset), **_UNREAD}
                    raise ApiError(409, {"error": "offset_mismatch"}, headers)
                start = current.offset
                if declared and declared.isdigit() and start + int(declared) > current.length:
                    detail = "past Upload-Length"
                    raise ApiError(413, {"error": "payload_too_large", "detail": detail}, _UNREAD)
                room = free_disk_bytes(context.blobs.root) - context.settings.min_free_disk_bytes
                if room < min(current.length - start, _ROOM_TO_START):
                    error = insufficient_storage(context.settings)
                    headers = {"Upload-Offset": str(start), **_UNREAD}
                    raise ApiError(error.status, error.body, headers)
                return await _append(request, context, device_name, current, fd, held, expected)
    except (UploadBusy, UploadLocked):
        raise ApiError(423, {"error": "upload_locked"}, _UNREAD) from None
    except FileNotFoundError:
        return await run_in_threadpool(_recover, context, device_name, row)


#: A PATCH starts only if the disk has this much room above the floor (or the rest of the file).
_ROOM_TO_START = 64 * 1024

#: An answer given before the body was read ends the connection: the client then stops
#: sending a body nobody reads (one waiting on `Expect: 100-continue` never sent it).
_UNREAD = {"Connection": "close"}


#: A body from which no byte came for this long, while a later request waits for its upload,
#: is taken for the body of a connection that died: what came of it is stored.
_STALLED_S = 1.0


class _Received:
    """How far a body got into the partial file (moves with each write, never ahead of it)."""

    def __init__(self) -> None:
        self.bytes = 0
        self.cut = False  # the client went away mid-body
        self.interrupted = False  # another request asked for the upload
        self.full = False  # the disk reached the floor kept for edits


async def _pump(
    request: Request, context: ServerContext, fd: int, row: Upload, start: int,
    hashes: _BackgroundHashes, received: _Received,
) -> None:  # fmt: skip
    root, floor = context.blobs.root, context.settings.min_free_disk_bytes
    try:
        async for piece in request.stream():
            if start + received.bytes + len(piece) > row.length:
                os.ftruncate(fd, start)
                raise ApiError(413, {"error": "payload_too_large", "detail": "past Upload-Length"})
            room = free_disk_bytes(root) - floor
            if room < len(piece):  # write up to the floor, keep that, and stop
                received.full = True
                piece = piece[: max(room, 0)]
            _write_all(fd, piece)
            received.bytes += len(piece)
            await hashes.update(piece)
            if received.full:
                return
    except ClientDisconnect:
        received.cut = True


async def _read_body(
    request: Request, context: ServerContext, fd: int, row: Upload, start: int,
    hashes: _BackgroundHashes, held: HeldUpload,
) -> _Received:  # fmt: skip
    """The body into the file until it ends, the client goes, or a later request asks for
    the upload while no byte comes (tusd's release request: the client reconnected, and its
    old connection, silent now, may never be seen to end)."""
    received = _Received()
    reading = asyncio.ensure_future(_pump(request, context, fd, row, start, hashes, received))
    asked = asyncio.ensure_future(held.let_go.wait())
    try:
        await asyncio.wait({reading, asked}, return_when=asyncio.FIRST_COMPLETED)
        while not reading.done():  # asked: go on only while bytes still come
            before = received.bytes
            await asyncio.wait({reading}, timeout=_STALLED_S)
            if received.bytes == before:
                break
    finally:
        asked.cancel()
        if not reading.done():
            received.interrupted = True
            reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading
    return received


async def _append(
    request: Request,
    context: ServerContext,
    device_name: str,
    row: Upload,
    fd: int,
    held: HeldUpload,
    expected: bytes | None,
) -> Upload:
    start = row.offset
    os.ftruncate(fd, start)  # bytes past the last acknowledged offset (a killed PATCH) go
    os.lseek(fd, start, os.SEEK_SET)
    chunk = hashlib.sha256() if expected is not None else None
    whole = context.hashes.resume(row.id, start)
    hashes = _BackgroundHashes([digest for digest in (chunk, whole) if digest is not None])
    received = await _read_body(request, context, fd, row, start, hashes, held)
    if received.interrupted:
        # A cancelled hash hand-over may have missed a piece: neither digest can be trusted.
        chunk = whole = None
    else:
        await hashes.finish()
    if expected is not None and (
        received.cut or received.interrupted or received.full
        or chunk is None or chunk.digest() != expected
    ):  # fmt: skip
        os.ftruncate(fd, start)
        if received.interrupted:
            raise _interrupted(row)
        if received.full:
            raise insufficient_storage(context.settings)
        raise checksum_mismatch("the chunk does not match Upload-Checksum")
    offset = start + received.bytes
    if offset < row.length:
        await run_in_threadpool(_hold, fd, context, row, offset)
        if whole is not None:
            context.hashes.keep(row.id, offset, whole)
        else:
            context.hashes.forget(row.id)
        if received.interrupted:
            raise _interrupted(row)
        if received.full:
            error = insufficient_storage(context.settings)
            raise ApiError(error.status, error.body, {"Upload-Offset": str(row.offset)})
        return row
    await run_in_threadpool(os.fsync, fd)
    context.hashes.forget(row.id)
    if whole is not None:
        digest = whole.hexdigest()
    else:
        digest = await run_in_threadpool(file_sha256, context.blobs.partial_path(row.id))
    if digest != row.sha256:
        os.ftruncate(fd, 0)
        await run_in_threadpool(os.fsync, fd)
        await run_in_threadpool(move_offset, context.store, context.settings, row, 0)
        raise checksum_mismatch("the file does not match its sha256; the upload starts again at 0")
    await run_in_threadpool(complete_upload, context.store, context.blobs, row, device_name)
    return row


def _interrupted(row: Upload) -> ApiError:
    """What a PATCH that let go of its upload answers (its client has most likely gone)."""
    detail = "another request for this upload took over"
    headers = {"Upload-Offset": str(row.offset)}
    return ApiError(409, {"error": "upload_interrupted", "detail": detail}, headers)


def _hold(fd: int, context: ServerContext, row: Upload, offset: int) -> None:
    """Make the bytes before `offset` durable, then record the offset (one worker hop)."""
    os.fsync(fd)
    move_offset(context.store, context.settings, row, offset)


def _recover(context: ServerContext, device_name: str, row: Upload) -> Upload:
    """The partial file is gone: completed (or terminated) by another request, or renamed onto
    its blob by a process that died before recording it."""
    current = find_upload(context.store, row.device_id, row.id)
    if current is None:
        raise ApiError(404, {"error": "not_found"})
    if not current.complete:
        if context.blobs.has_blob(current.sha256):
            complete_upload(context.store, context.blobs, current, device_name)
        else:
            context.blobs.create_partial(current.id)
            move_offset(context.store, context.settings, current, 0)
    raise ApiError(409, {"error": "offset_mismatch"}, {"Upload-Offset": str(current.offset)})
