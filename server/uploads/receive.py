"""A tus PATCH body into its upload's partial file, under the upload's lock.

The body is streamed into the file as it arrives (memory stays flat), its writeback started
every few MiB, and fsynced before the offset moves; a connection cut mid-body keeps what
arrived, unless the chunk carried
`Upload-Checksum` (what arrived cannot be checked, so it is dropped). The chunk that brings
the last byte is accepted only if the whole file matches the announced sha256; otherwise the
upload starts again at 0. A wrong offset is refused before a byte of the body is read, and a
later request on the upload (the client reconnected) makes a silent body let go
(server/uploads/locks.py). Writing stops at the free-disk floor (server/uploads/budgets.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio.to_thread

from server.db.models import Upload
from server.db.store import Store
from server.errors import (
    ChecksumMismatch,
    NotFound,
    OffsetMismatch,
    TooLarge,
    UploadInterrupted,
    UploadLocked,
)
from server.settings import Settings
from server.uploads.blobs import BlobStore, RunningHashes, file_sha256
from server.uploads.budgets import free_disk_bytes, insufficient_storage
from server.uploads.lifecycle import complete_upload, find_upload, move_offset
from server.uploads.locks import HeldUpload, UploadLocks

__all__ = ["BodyCut", "Chunk", "Uploads", "complete_empty", "receive_body"]

_T = TypeVar("_T")
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


class BodyCut(Exception):
    """The client went away before the chunk's body ended (what arrived is kept)."""


@dataclass(frozen=True)
class Uploads:
    """What writing an upload touches: its row, its files, the running hashes, the locks."""

    store: Store
    blobs: BlobStore
    hashes: RunningHashes
    locks: UploadLocks
    settings: Settings


@dataclass(frozen=True)
class Chunk:
    """One request body for an upload, as the client announced it."""

    #: The offset the client says it sends from (`Upload-Offset`).
    claimed: int
    #: Its declared length (`Content-Length`), if any.
    declared: int | None
    #: The sha256 the chunk must match (`Upload-Checksum`), if any.
    expected: bytes | None
    #: When its request arrived (a later request on the upload may take it over).
    arrived: float
    #: The body, piece by piece; raises `BodyCut` if the client goes away.
    pieces: AsyncIterator[bytes]


async def _in_thread(function: Callable[..., _T], *args: Any) -> _T:
    """Blocking work (database, fsync, hashing a file) in a worker thread, as Starlette runs
    it: a cancelled request still waits for the thread, so no descriptor closes under it."""
    return await anyio.to_thread.run_sync(functools.partial(function, *args))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


#: Body bytes written before their writeback is started (`_start_writeback`).
_WRITEBACK_BYTES = 8 << 20


def _start_writeback(fd: int, start: int, length: int) -> None:
    """Start writing the file's [start, start + length) to disk without waiting for it, so the
    fsync that ends the chunk waits for its last few MiB instead of all of them (it would hold
    the client's next chunk meanwhile). `POSIX_FADV_DONTNEED` starts the writeback of dirty
    pages and drops only those already clean, as PostgreSQL's `pg_flush_data` uses it where
    `sync_file_range` is missing. Durability is unchanged: the offset moves after `fsync`."""
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, start, length, os.POSIX_FADV_DONTNEED)


def complete_empty(uploads: Uploads, device_name: str, row: Upload) -> None:
    """An empty file has no chunk to bring its last byte: it completes as it is created."""
    if row.sha256 != _EMPTY_SHA256:
        raise ChecksumMismatch("the file does not match its sha256")
    complete_upload(uploads.store, uploads.blobs, row, device_name)


async def receive_body(uploads: Uploads, device_name: str, row: Upload, chunk: Chunk) -> Upload:
    """Append the chunk at its claimed offset, under the upload's lock; a wrong offset is
    refused before a byte of the body is read (`body_unread`)."""
    try:
        async with uploads.locks.hold(row.id, chunk.arrived) as held:
            with uploads.blobs.writing(row.id) as fd:
                current = await _in_thread(find_upload, uploads.store, row.device_id, row.id)
                if current is None:
                    raise NotFound(body_unread=True)
                if chunk.claimed != current.offset or current.complete:
                    raise OffsetMismatch(current.offset, body_unread=True)
                start = current.offset
                if chunk.declared is not None and start + chunk.declared > current.length:
                    raise TooLarge("past Upload-Length", body_unread=True)
                room = free_disk_bytes(uploads.blobs.root) - uploads.settings.min_free_disk_bytes
                if room < min(current.length - start, _ROOM_TO_START):
                    raise insufficient_storage(uploads.settings, offset=start, body_unread=True)
                return await _append(uploads, device_name, current, fd, held, chunk)
    except UploadLocked:  # UploadBusy too: another process writes the file
        raise UploadLocked(body_unread=True) from None
    except FileNotFoundError:
        return await _in_thread(_recover, uploads, device_name, row)


#: A PATCH starts only if the disk has this much room above the floor (or the rest of the file).
_ROOM_TO_START = 64 * 1024

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
    uploads: Uploads, chunk: Chunk, fd: int, row: Upload, start: int,
    digests: list[Any], received: _Received,
) -> None:  # fmt: skip
    """The body into the file, each piece hashed as it is written (the chunk's sha256, the
    whole file's), on the event loop as the sink of upload_bench does: handing pieces to a
    hashing thread cost the server as much CPU as the hashing itself, and on a machine whose
    other core runs the client it bought no overlap. Between a write and its hash there is
    no await, so the digests always cover exactly the bytes written."""
    root, floor = uploads.blobs.root, uploads.settings.min_free_disk_bytes
    flushed = 0  # bytes of this body whose writeback was started
    try:
        async for piece in chunk.pieces:
            if start + received.bytes + len(piece) > row.length:
                os.ftruncate(fd, start)
                raise TooLarge("past Upload-Length")
            room = free_disk_bytes(root) - floor
            if room < len(piece):  # write up to the floor, keep that, and stop
                received.full = True
                piece = piece[: max(room, 0)]
            _write_all(fd, piece)
            received.bytes += len(piece)
            if received.bytes - flushed >= _WRITEBACK_BYTES:
                _start_writeback(fd, start + flushed, received.bytes - flushed)
                flushed = received.bytes
            for digest in digests:
                digest.update(piece)
            if received.full:
                return
    except BodyCut:
        received.cut = True


async def _read_body(
    uploads: Uploads, chunk: Chunk, fd: int, row: Upload, start: int,
    digests: list[Any], held: HeldUpload,
) -> _Received:  # fmt: skip
    """The body into the file until it ends, the client goes, or a later request asks for
    the upload while no byte comes (tusd's release request: the client reconnected, and its
    old connection, silent now, may never be seen to end)."""
    received = _Received()
    reading = asyncio.ensure_future(_pump(uploads, chunk, fd, row, start, digests, received))
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
    uploads: Uploads, device_name: str, row: Upload, fd: int, held: HeldUpload, chunk: Chunk
) -> Upload:
    start = row.offset
    os.ftruncate(fd, start)  # bytes past the last acknowledged offset (a killed PATCH) go
    os.lseek(fd, start, os.SEEK_SET)
    expected = chunk.expected
    checked = hashlib.sha256() if expected is not None else None
    whole = uploads.hashes.resume(row.id, start)
    digests = [digest for digest in (checked, whole) if digest is not None]
    received = await _read_body(uploads, chunk, fd, row, start, digests, held)
    if expected is not None and (
        received.cut or received.interrupted or received.full
        or checked is None or checked.digest() != expected
    ):  # fmt: skip
        os.ftruncate(fd, start)
        if received.interrupted:
            raise _interrupted(row)
        if received.full:
            raise insufficient_storage(uploads.settings)
        raise ChecksumMismatch("the chunk does not match Upload-Checksum")
    offset = start + received.bytes
    if offset < row.length:
        await _in_thread(_hold, fd, uploads, row, offset)
        if whole is not None:
            uploads.hashes.keep(row.id, offset, whole)
        else:
            uploads.hashes.forget(row.id)
        if received.interrupted:
            raise _interrupted(row)
        if received.full:
            raise insufficient_storage(uploads.settings, offset=row.offset)
        return row
    await _in_thread(os.fsync, fd)
    uploads.hashes.forget(row.id)
    if whole is not None:
        digest = whole.hexdigest()
    else:
        digest = await _in_thread(file_sha256, uploads.blobs.partial_path(row.id))
    if digest != row.sha256:
        os.ftruncate(fd, 0)
        await _in_thread(os.fsync, fd)
        await _in_thread(move_offset, uploads.store, uploads.settings, row, 0)
        raise ChecksumMismatch("the file does not match its sha256; the upload starts again at 0")
    await _in_thread(complete_upload, uploads.store, uploads.blobs, row, device_name)
    return row


def _interrupted(row: Upload) -> UploadInterrupted:
    """What a PATCH that let go of its upload answers (its client has most likely gone)."""
    return UploadInterrupted("another request for this upload took over", offset=row.offset)


def _hold(fd: int, uploads: Uploads, row: Upload, offset: int) -> None:
    """Make the bytes before `offset` durable, then record the offset (one worker hop)."""
    os.fsync(fd)
    move_offset(uploads.store, uploads.settings, row, offset)


def _recover(uploads: Uploads, device_name: str, row: Upload) -> Upload:
    """The partial file is gone: completed (or terminated) by another request, or renamed onto
    its blob by a process that died before recording it."""
    current = find_upload(uploads.store, row.device_id, row.id)
    if current is None:
        raise NotFound()
    if not current.complete:
        if uploads.blobs.has_blob(current.sha256):
            complete_upload(uploads.store, uploads.blobs, current, device_name)
        else:
            uploads.blobs.create_partial(current.id)
            move_offset(uploads.store, uploads.settings, current, 0)
    raise OffsetMismatch(current.offset)
