"""What the domain refuses, named by the problem; `server/http.py` gives each its HTTP answer.

    DomainError                  `detail` (why, for the client), `offset`, `body_unread`
     ├── NotFound                no such thing, or not the asker's (hidden and missing alike)
     ├── Forbidden               the asker may see it but not do this
     ├── InvalidInput            a value the request carries is unusable
     ├── KeyReused               an idempotency key came again with another request
     ├── TooLarge                past a size limit
     ├── UnsupportedMediaType    a content type this server does not take
     ├── NoRoom                  no room for the bytes now (retry later)
     │    ├── InsufficientStorage      the disk is at the floor kept free for edits
     │    ├── UploadBudgetExceeded     a device's unfinished uploads are at their budget
     │    └── StorageBudgetExceeded    a user's stored files are at their budget
     └── UploadError             about one tus upload
          ├── UploadExpired      it outlived its `Upload-Expires`
          ├── UploadLocked       another request holds it
          ├── OffsetMismatch     the chunk does not start where the upload stands
          ├── UploadInterrupted  a later request for it took over this one
          └── ChecksumMismatch   the bytes do not match their announced sha256

Domain code (`server/db/`, `server/records/`, `server/scope/`, `server/uploads/`, ...) raises
these and never imports the HTTP layer; `DOMAIN_ANSWERS` in `server/http.py` is the one table
that gives each its status and `error` name (tests/server/test_layout.py holds both rules).
`offset` is where the upload stands, for the client to resume from; `body_unread` says the
request was refused before its body was read, so the connection has to end.
"""

from __future__ import annotations

__all__ = [
    "ChecksumMismatch",
    "DomainError",
    "Forbidden",
    "InsufficientStorage",
    "InvalidInput",
    "KeyReused",
    "NoRoom",
    "NotFound",
    "OffsetMismatch",
    "StorageBudgetExceeded",
    "TooLarge",
    "UnsupportedMediaType",
    "UploadBudgetExceeded",
    "UploadError",
    "UploadExpired",
    "UploadInterrupted",
    "UploadLocked",
]


class DomainError(Exception):
    """A request the domain refuses."""

    def __init__(
        self, detail: str | None = None, *, offset: int | None = None, body_unread: bool = False
    ) -> None:
        super().__init__(detail or type(self).__name__)
        self.detail = detail
        self.offset = offset
        self.body_unread = body_unread


class NotFound(DomainError):
    """No such thing, or one the asker may not see."""


class Forbidden(DomainError):
    """The asker may see the thing but not do this (an admin's action)."""


class InvalidInput(DomainError):
    """A value the request carries is unusable (`detail` says which and why)."""


class KeyReused(DomainError):
    """An idempotency key came again with a different request."""


class TooLarge(DomainError):
    """Past a size limit that no retry can pass."""


class UnsupportedMediaType(DomainError):
    """A content type this server does not take."""


class NoRoom(DomainError):
    """No room for these bytes now; the same request may fit later."""


class InsufficientStorage(NoRoom):
    """The disk is at the floor the server keeps free for edits."""


class UploadBudgetExceeded(NoRoom):
    """The device's unfinished uploads would pass their budget."""


class StorageBudgetExceeded(NoRoom):
    """The user's stored files would pass their budget."""


class UploadError(DomainError):
    """About one tus upload."""


class UploadExpired(UploadError):
    """The unfinished upload outlived its `Upload-Expires` (it is removed now)."""


class UploadLocked(UploadError):
    """Another request holds the upload and did not let go in time."""


class OffsetMismatch(UploadError):
    """The chunk does not start at the upload's acknowledged offset (`offset`)."""

    def __init__(self, offset: int, *, body_unread: bool = False) -> None:
        super().__init__(offset=offset, body_unread=body_unread)


class UploadInterrupted(UploadError):
    """A later request for the upload took over while this one's body stalled."""


class ChecksumMismatch(UploadError):
    """The bytes do not match the sha256 announced for them."""
