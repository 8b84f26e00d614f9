"""The tus 1.0.0 client side of an upload: the requests, and what each reply means.

`classify` (pure, tested directly) maps a tus reply to what the uploader does next (the tus
rows here, every shared family from `app.sync.errors.classify_status`). The requests stream
the file (``content`` is an async iterator of 1 MiB pieces), so memory stays flat whatever
the file's or the chunk's size; chunk sizes are `app.sync.chunks`', checksums
`app.sync.upload_hashing`'s.
"""

from __future__ import annotations

import base64
import enum
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from app.disk import file_sha256
from app.states import Reason, ReplyKind
from app.sync.chunks import ChunkSizer
from app.sync.errors import Verdict, classify_status, parse_retry_after
from app.sync.transport import ServerClient
from app.sync.upload_hashing import ChecksumAhead, chunk_checksum, read_range

__all__ = [
    "CHECKSUM_MISMATCH",
    "TUS_VERSION",
    "ChecksumAhead",
    "ChunkSizer",
    "Next",
    "Step",
    "TusReply",
    "chunk_checksum",
    "classify",
    "create_upload",
    "delete_upload",
    "file_sha256",
    "head_offset",
    "patch_chunk",
]

TUS_VERSION = "1.0.0"
#: tus's checksum extension: the chunk's checksum did not match (or, on the last byte, the
#: whole file's sha256: then the server restarts the upload at 0).
CHECKSUM_MISMATCH = 460
#: The server's upload budgets or free-disk floor have no room for the file now.
INSUFFICIENT_STORAGE = 507


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
class Step:
    """What the uploader does after a tus reply (`next`), and the shared `Verdict` of
    `app.sync.errors` its attempt records (the family, the words, the reason code)."""

    next: Next
    verdict: Verdict

    @property
    def reason(self) -> str:
        return self.verdict.reason

    @property
    def code(self) -> Reason:
        return self.verdict.code

    @classmethod
    def retry(cls, reason: str, code: Reason) -> Step:
        return cls(Next.RETRY, Verdict(ReplyKind.TRANSIENT, reason, code))

    @classmethod
    def fail(cls, reason: str, code: Reason) -> Step:
        return cls(Next.FAIL, Verdict(ReplyKind.PERMANENT, reason, code))


#: Each family of the shared table, as the uploader's next move.
_NEXT_OF_KIND = {
    ReplyKind.SUCCESS: Next.GO_ON,
    ReplyKind.TRANSIENT: Next.RETRY,
    ReplyKind.PERMANENT: Next.FAIL,
    ReplyKind.AUTH: Next.SIGN_IN,
    # A version conflict is a work order's; an upload has none to resolve.
    ReplyKind.CONFLICT: Next.FAIL,
}

#: A file's own words for the shared table's refusals (shown on its tile as "Failed: …").
_FILE_WORDS = {
    Reason.FORBIDDEN: "this device may not upload to that work order",
    Reason.TOO_LARGE: "the file is larger than the server accepts",
    Reason.UNSUPPORTED_TYPE: "the server does not accept files of this type",
    Reason.KEY_REUSED: "the server holds another file under this attachment's id",
}


def _tus_row(status: int, step: str) -> Step | None:
    """The rows of the tus protocol itself; None: the shared table decides."""
    if 200 <= status < 300:  # tus answers a PATCH, a HEAD and a DELETE with 204 or 200
        return Step(Next.GO_ON, Verdict(ReplyKind.SUCCESS, "ok", Reason.APPLIED))
    if status in (404, 410):
        if step == "create":
            words = "the work order does not exist on the server"
            return Step.fail(words, Reason.NOT_FOUND)
        words = "the server no longer holds the upload"
        return Step(Next.RESTART, Verdict(ReplyKind.TRANSIENT, words, Reason.NOT_FOUND))
    if status == 409 and step == "patch":
        words = "the server holds a different offset"
        return Step(Next.HEAD, Verdict(ReplyKind.TRANSIENT, words, Reason.REFUSED))
    if status == 409 and step == "delete":
        words = "the upload had completed: remove the attachment"
        return Step(Next.GO_ON, Verdict(ReplyKind.SUCCESS, words, Reason.APPLIED))
    if status == 423:
        return Step.retry(
            "the server is still writing an earlier piece of this upload", Reason.SERVER_BUSY
        )
    if status == CHECKSUM_MISMATCH:
        return Step.retry("the bytes arrived damaged (checksum)", Reason.CHECKSUM_MISMATCH)
    if status == INSUFFICIENT_STORAGE and step in ("create", "patch"):
        # A full upload budget or a disk at the server's floor: room comes back, keep the file.
        words = "the server has no room for the file now; it is tried again later"
        return Step.retry(words, Reason.SERVER_BUSY)
    return None


def classify(status: int, step: str, error: str | None = None) -> Step:
    """What a tus reply means at ``step`` (``create``, ``head``, ``patch``, ``delete``): the
    tus rows first, then every shared family from `classify_status` (the one status table),
    worded for a file where its words are a work order's."""
    own = _tus_row(status, step)
    if own is not None:
        return own
    verdict = classify_status(status, error)
    words = _FILE_WORDS.get(verdict.code)
    if words is None and verdict.kind is ReplyKind.PERMANENT:
        words = f"the server refused the upload ({error or status})"
    if words is not None:
        verdict = Verdict(verdict.kind, words, verdict.code)
    return Step(_NEXT_OF_KIND[verdict.kind], verdict)


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


async def _pieces(path: Path, offset: int, length: int) -> AsyncIterator[bytes]:
    for piece in read_range(path, offset, length):
        yield piece


async def patch_chunk(
    client: ServerClient, url: str, path: Path, offset: int, length: int, checksum: str | None
) -> TusReply:
    """PATCH [offset, offset + length) of the file, with ``Upload-Checksum`` unless None."""
    headers = {
        "Tus-Resumable": TUS_VERSION,
        "Content-Type": "application/offset+octet-stream",
        "Content-Length": str(length),
        "Upload-Offset": str(offset),
    }
    if checksum is not None:
        headers["Upload-Checksum"] = checksum
    response = await client.send(
        "PATCH", url, headers=headers, content=_pieces(path, offset, length)
    )
    return _reply(response)
