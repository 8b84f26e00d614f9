"""The tus 1.0.0 client side of an upload: requests, what each reply means, chunk sizes.

Pure parts (no I/O) are tested directly: `classify` maps a tus reply to what the uploader
does next; `ChunkSizer` picks the next chunk's size from the last one's speed (start 1 MiB,
at most 8 MiB, aiming at ``target_s`` a chunk so that an edit queued behind an upload waits
at most about that long). The requests stream the file (``content`` is an async iterator of
1 MiB pieces), so memory stays flat whatever the file's size. `ChecksumAhead` reads and hashes
the next chunk (for its ``Upload-Checksum``) in a thread while the current one is on the wire.
"""

from __future__ import annotations

import asyncio
import base64
import enum
import hashlib
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx

from app.disk import file_sha256
from app.states import Reason
from app.sync.errors import parse_retry_after
from app.sync.transport import ServerClient

__all__ = [
    "CHECKSUM_MISMATCH",
    "TUS_VERSION",
    "ChecksumAhead",
    "ChunkSizer",
    "Next",
    "TusReply",
    "classify",
    "create_upload",
    "delete_upload",
    "file_sha256",
    "head_offset",
    "patch_chunk",
]

TUS_VERSION = "1.0.0"
MIB = 1 << 20
#: A PATCH body is sent in pieces of this size: each costs a turn through httpcore, h11 and
#: the transport, so 64 KiB pieces spent as much time there as on the bytes.
_PIECE = MIB
T = TypeVar("T")
#: tus's checksum extension: the chunk's checksum did not match (or, on the last byte, the
#: whole file's sha256: then the server restarts the upload at 0).
CHECKSUM_MISMATCH = 460


class Next(enum.Enum):
    """What the uploader does after a reply."""

    GO_ON = "go_on"  # it worked: record it, and send on
    HEAD = "head"  # our offset is wrong (409): ask the server's, then resend from there
    RESTART = "restart"  # the upload is gone on the server (404, 410): create it again
    RETRY = "retry"  # transient: back off, then try again
    FAIL = "fail"  # permanent: the person decides
    SIGN_IN = "sign_in"  # 401


@dataclass(frozen=True)
class TusReply:
    status: int
    offset: int | None
    location: str | None
    retry_after: float | None
    error: str | None


@dataclass(frozen=True)
class Verdict:
    next: Next
    reason: str
    code: Reason | None = None


_FAILS = {
    403: (Reason.FORBIDDEN, "this device may not upload to that work order"),
    413: (Reason.TOO_LARGE, "the file is larger than the server accepts"),
    415: (Reason.UNSUPPORTED_TYPE, "the server does not accept files of this type"),
}


def classify(status: int, step: str, error: str | None = None) -> Verdict:
    """What a tus reply means at ``step`` (``create``, ``head``, ``patch``, ``delete``)."""
    if 200 <= status < 300:
        return Verdict(Next.GO_ON, "ok")
    if status == 401:
        return Verdict(Next.SIGN_IN, "the server refused this device's token", Reason.SIGNED_OUT)
    if status in (404, 410):
        if step == "create":
            return Verdict(
                Next.FAIL, "the work order does not exist on the server", Reason.NOT_FOUND
            )
        return Verdict(Next.RESTART, "the server no longer holds the upload", Reason.NOT_FOUND)
    if status == 409 and step == "patch":
        return Verdict(Next.HEAD, "the server holds a different offset", Reason.REFUSED)
    if status == 409 and step == "delete":
        return Verdict(Next.GO_ON, "the upload had completed: remove the attachment")
    if status == 423:
        words = "the server is still writing an earlier piece of this upload"
        return Verdict(Next.RETRY, words, Reason.SERVER_BUSY)
    if status == CHECKSUM_MISMATCH:
        return Verdict(Next.RETRY, "the bytes arrived damaged (checksum)", Reason.CHECKSUM_MISMATCH)
    if status in _FAILS:
        code, words = _FAILS[status]
        return Verdict(Next.FAIL, words, code)
    if status == 422:
        if error == "idempotency_key_reused":
            words = "the server holds another file under this attachment's id"
            return Verdict(Next.FAIL, words, Reason.KEY_REUSED)
        return Verdict(Next.FAIL, f"the server refused the upload ({error or 422})", Reason.INVALID)
    if status == 429:
        return Verdict(Next.RETRY, "the server asks to slow down", Reason.RATE_LIMITED)
    if status in (502, 503, 504):
        return Verdict(Next.RETRY, f"the server is busy ({status})", Reason.SERVER_BUSY)
    if status >= 500:
        return Verdict(Next.RETRY, f"the server failed ({status})", Reason.SERVER_ERROR)
    return Verdict(Next.FAIL, f"the server refused the upload ({status})", Reason.REFUSED)


class ChunkSizer:
    """The next chunk's size from the last one's speed, within [``low``, ``high``]: what the
    link sends in ``target_s``. It grows at once to what the link shows (a fast link is at
    8 MiB after one chunk), shrinks by at most half a step (one slow chunk is not a slow
    link), and halves after a failure."""

    def __init__(
        self,
        start: int = MIB,
        high: int = 8 * MIB,
        *,
        low: int = 256 * 1024,
        target_s: float = 2.0,
    ) -> None:
        self.high = max(high, 1)
        self.low = min(low, self.high)
        self.size = min(max(start, self.low), self.high)
        self.target_s = target_s

    def sent(self, size: int, seconds: float) -> int:
        if size >= self.size and seconds > 0:
            wanted = int(size / seconds * self.target_s)
            self.size = max(min(wanted, self.high), self.size // 2, self.low)
        elif size >= self.size:
            self.size = min(self.size * 2, self.high)
        return self.size

    def failed(self) -> int:
        self.size = max(self.size // 2, self.low)
        return self.size


def _reply(response: httpx.Response) -> TusReply:
    offset = response.headers.get("upload-offset")
    error = None
    if response.headers.get("content-type", "").startswith("application/json"):
        try:
            body = response.json()
            error = body.get("error") if isinstance(body, dict) else None
        except ValueError:
            error = None
    return TusReply(
        status=response.status_code,
        offset=int(offset) if offset is not None and offset.isdigit() else None,
        location=response.headers.get("location"),
        retry_after=parse_retry_after(response.headers.get("retry-after")),
        error=error if isinstance(error, str) else None,
    )


def _metadata(pairs: dict[str, str]) -> str:
    return ",".join(
        f"{key} {base64.b64encode(value.encode()).decode()}" for key, value in pairs.items()
    )


async def create_upload(
    client: ServerClient,
    *,
    attachment_id: str,
    entity_id: str,
    filename: str,
    content_type: str,
    size: int,
    sha256: str,
) -> TusReply:
    """POST /v1/uploads: the same attachment_id again answers the same upload."""
    metadata = {
        "attachment_id": attachment_id,
        "entity_id": entity_id,
        "filename": filename,
        "content_type": content_type,
        "sha256": sha256,
    }
    headers = {
        "Tus-Resumable": TUS_VERSION,
        "Upload-Length": str(size),
        "Upload-Metadata": _metadata(metadata),
    }
    return _reply(await client.send("POST", "/v1/uploads", headers=headers))


async def head_offset(client: ServerClient, url: str) -> TusReply:
    return _reply(await client.send("HEAD", url, headers={"Tus-Resumable": TUS_VERSION}))


async def delete_upload(client: ServerClient, url: str) -> TusReply:
    """Termination: the server drops an unfinished upload."""
    return _reply(await client.send("DELETE", url, headers={"Tus-Resumable": TUS_VERSION}))


def _read_range(path: Path, offset: int, length: int) -> Iterator[bytes]:
    """The file's bytes [offset, offset + length) in 64 KiB pieces."""
    with path.open("rb") as source:
        source.seek(offset)
        left = length
        while left:
            piece = source.read(min(_PIECE, left))
            if not piece:
                raise OSError(f"{path} is shorter than expected")
            left -= len(piece)
            yield piece


def chunk_checksum(path: Path, offset: int, length: int) -> str:
    """``sha256 <base64>`` of the file's bytes [offset, offset + length)."""
    digest = hashlib.sha256()
    for piece in _read_range(path, offset, length):
        digest.update(piece)
    return "sha256 " + base64.b64encode(digest.digest()).decode()


class ChecksumAhead:
    """``Upload-Checksum`` of a chunk, read and hashed in a thread; while a chunk is on the
    wire (`sending`), the next one's is made, so the next step need not wait for it. Holds
    one digest (not the bytes): memory stays flat."""

    def __init__(self) -> None:
        self._ready: tuple[Path, int, int, str] | None = None

    async def checksum(self, path: Path, offset: int, length: int) -> str:
        ready, self._ready = self._ready, None
        if ready is not None and ready[:3] == (path, offset, length):
            return ready[3]
        return await asyncio.to_thread(chunk_checksum, path, offset, length)

    async def sending(self, request: Awaitable[T], path: Path, offset: int, length: int) -> T:
        """Await ``request`` while the checksum of [offset, offset + length) is made (none
        if ``length`` is 0). A failed request drops it: the next chunk may be another."""
        if length <= 0:
            return await request
        ahead = asyncio.ensure_future(asyncio.to_thread(chunk_checksum, path, offset, length))
        try:
            result = await request
        except BaseException:
            ahead.cancel()  # the thread ends on its own (a read and a hash); nobody waits
            raise
        try:
            self._ready = (path, offset, length, await ahead)
        except OSError:
            self._ready = None  # unreadable now: the next step reads it again and says so
        return result


async def _pieces(path: Path, offset: int, length: int) -> AsyncIterator[bytes]:
    for piece in _read_range(path, offset, length):
        yield piece


async def patch_chunk(
    client: ServerClient, url: str, path: Path, offset: int, length: int, checksum: str
) -> TusReply:
    headers = {
        "Tus-Resumable": TUS_VERSION,
        "Content-Type": "application/offset+octet-stream",
        "Content-Length": str(length),
        "Upload-Offset": str(offset),
        "Upload-Checksum": checksum,
    }
    response = await client.send(
        "PATCH", url, headers=headers, content=_pieces(path, offset, length)
    )
    return _reply(response)
