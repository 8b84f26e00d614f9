"""The documented answers of the tus routes (`/v1/uploads`) and of the attachment reads.

tus answers mostly in headers; bodies appear only on errors, as `{"error": <name>, …}` like
every other route. A HEAD answer carries no body, so its errors are documented without one.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from server.openapi.answers import (
    AttachmentRemoved,
    KeyInUse,
    KeyProblem,
    KeyReused,
    error_responses,
)

__all__ = [
    "ATTACHMENT_RESPONSES",
    "DELETE_RESPONSES",
    "HEAD_RESPONSES",
    "OPTIONS_RESPONSES",
    "PATCH_RESPONSES",
    "POST_RESPONSES",
    "REMOVE_RESPONSES",
    "THUMBNAIL_RESPONSES",
]

Responses = dict[int | str, dict[str, Any]]


class UnsupportedTusVersion(BaseModel):
    """412: `Tus-Resumable` is missing or not 1.0.0 (`Tus-Version` lists what is spoken)."""

    error: Literal["unsupported_tus_version"]


class OffsetMismatch(BaseModel):
    """409: `Upload-Offset` is not where the upload stands (see the `Upload-Offset` header)."""

    error: Literal["offset_mismatch"]


class OffsetMismatchOrInterrupted(BaseModel):
    """409: `Upload-Offset` is not where the upload stands, or a later request on this upload
    took it over while this body was silent (`upload_interrupted`: what arrived is kept); the
    `Upload-Offset` header says where it stands."""

    error: Literal["offset_mismatch", "upload_interrupted"]
    detail: str | None = None


class InsufficientStorage(BaseModel):
    """507: no room for the file now: this device's unfinished uploads would pass its budget
    (`upload_budget_exceeded`), the user's stored files theirs (`storage_budget_exceeded`),
    or the disk would go below the floor kept free for edits (`insufficient_storage`). Retry
    later; the device keeps the file. A file larger than a whole budget gets 413."""

    error: Literal["upload_budget_exceeded", "storage_budget_exceeded", "insufficient_storage"]
    detail: str


class DiskAtFloor(BaseModel):
    """507: the disk reached the floor kept free for edits; the bytes written before it are
    kept (`Upload-Offset`). Retry later."""

    error: Literal["insufficient_storage"]
    detail: str


class UploadComplete(BaseModel):
    """409: the upload is complete; it is an attachment now (remove that instead)."""

    error: Literal["upload_complete"]


class UploadExpired(BaseModel):
    """410: the unfinished upload expired and was removed; create it again."""

    error: Literal["upload_expired"]


class UploadLocked(BaseModel):
    """423: another request on this upload did not let go within the wait; retry shortly."""

    error: Literal["upload_locked"]


class ChecksumMismatch(BaseModel):
    """460: the chunk does not match `Upload-Checksum`, or the whole file not its sha256."""

    error: Literal["checksum_mismatch"]
    detail: str


class InvalidChecksum(BaseModel):
    """400: `Upload-Checksum` is not `sha256 <base64 digest>`."""

    error: Literal["invalid_checksum"]
    detail: str


class UnsupportedMediaType(BaseModel):
    """415: the content type is not one this server accepts."""

    error: Literal["unsupported_media_type"]
    detail: str


def _header(description: str, **schema: Any) -> dict[str, Any]:
    return {"description": description, "schema": {"type": "string", **schema}}


def _one(model: type[BaseModel], status: int, **extra: Any) -> Responses:
    description = (model.__doc__ or "").splitlines()[0].split(": ", 1)[-1]
    return {status: {"model": model, "description": description, **extra}}


_DIGITS = {"pattern": "^[0-9]+$"}
_TUS = {"Tus-Resumable": _header("Always 1.0.0", enum=["1.0.0"])}
_OFFSET = _header("Bytes the server holds, fsynced", **_DIGITS)
_EXPIRES = _header("When an unfinished upload is removed (HTTP date)")
_TUS_ERRORS = _one(
    UnsupportedTusVersion, 412, headers={"Tus-Version": _header("The versions spoken: 1.0.0")}
)

OPTIONS_RESPONSES: Responses = {
    204: {
        "description": "The tus versions, extensions and limits of this server",
        "headers": {
            **_TUS,
            "Tus-Version": _header("1.0.0"),
            "Tus-Max-Size": _header("Largest Upload-Length accepted", **_DIGITS),
            "Tus-Extension": _header(
                "creation,creation-with-upload,checksum,termination,expiration"
            ),
            "Tus-Checksum-Algorithm": _header("sha256"),
        },
    }
}

POST_RESPONSES: Responses = {
    201: {
        "description": "The upload (new, or the one this attachment_id already has)",
        "headers": {
            **_TUS,
            "Location": _header("The upload's URL, relative to this server"),
            "Upload-Offset": _OFFSET,
            "Upload-Expires": _EXPIRES,
        },
    },
    **error_responses(401, 404, 413, 429, invalid=(KeyReused,)),
    **_one(InvalidChecksum, 400),
    **_one(OffsetMismatch, 409, headers={"Upload-Offset": _OFFSET}),
    **_TUS_ERRORS,
    **_one(UnsupportedMediaType, 415),
    **_one(UploadLocked, 423),
    **_one(ChecksumMismatch, 460),
    **_one(InsufficientStorage, 507),
}

_STATE_ERRORS: Responses = {
    **error_responses(401, 404, 429),
    **_one(UploadExpired, 410),
    **_TUS_ERRORS,
}

PATCH_RESPONSES: Responses = {
    204: {
        "description": "The chunk is stored; the new offset",
        "headers": {**_TUS, "Upload-Offset": _OFFSET, "Upload-Expires": _EXPIRES},
    },
    **_STATE_ERRORS,
    **error_responses(413),
    **_one(InvalidChecksum, 400),
    **_one(OffsetMismatchOrInterrupted, 409, headers={"Upload-Offset": _OFFSET}),
    **_one(UnsupportedMediaType, 415),
    **_one(UploadLocked, 423),
    **_one(ChecksumMismatch, 460),
    **_one(DiskAtFloor, 507, headers={"Upload-Offset": _OFFSET}),
}

DELETE_RESPONSES: Responses = {
    204: {"description": "The unfinished upload and its bytes are gone", "headers": _TUS},
    **_STATE_ERRORS,
    **_one(UploadComplete, 409),
    **_one(UploadLocked, 423),
}

#: A HEAD answer has no body, errors included.
HEAD_RESPONSES: Responses = {
    200: {
        "description": "Where the upload stands (after a PATCH still being stored, a cut one,"
        " has recorded what it received)",
        "headers": {
            **_TUS,
            "Upload-Offset": _OFFSET,
            "Upload-Length": _header("The file's size", **_DIGITS),
            "Cache-Control": _header("no-store", enum=["no-store"]),
            "Upload-Expires": _EXPIRES,
        },
    },
    401: {"description": "Token missing, unknown or revoked"},
    404: {"description": "No such upload (or another device's)"},
    410: {"description": "The unfinished upload expired and was removed"},
    412: {"description": "`Tus-Resumable` is missing or not 1.0.0"},
    422: {"description": "A header is not as documented"},
    423: {"description": "A PATCH still being stored did not let go within the wait"},
    429: {"description": "Per-device rate limit"},
}

_ETAG = {"ETag": _header('The file\'s sha256, quoted: `"<sha256>"`')}
_BINARY = {"schema": {"type": "string", "format": "binary"}}

ATTACHMENT_RESPONSES: Responses = {
    200: {"description": "The file's bytes", "content": {"*/*": _BINARY}, "headers": _ETAG},
    206: {
        "description": "The requested byte range (`Content-Range`)",
        "content": {"*/*": _BINARY},
        "headers": _ETAG,
    },
    304: {"description": "ETag matched", "headers": _ETAG},
    **error_responses(401, 404, 429),
    416: {"description": "The range lies outside the file"},
}

THUMBNAIL_RESPONSES: Responses = {
    200: {
        "description": "A JPEG at most 256 pixels wide and high",
        "content": {"image/jpeg": _BINARY},
        "headers": _ETAG,
    },
    304: {"description": "ETag matched", "headers": _ETAG},
    **error_responses(401, 404, 429),
    **_one(UnsupportedMediaType, 415),
}

REMOVE_RESPONSES: Responses = {
    200: {"model": AttachmentRemoved, "description": "The attachment's tombstone"},
    **error_responses(
        401, 404, 429, bad_request=(KeyProblem,), conflict=(KeyInUse,), invalid=(KeyReused,)
    ),
}
