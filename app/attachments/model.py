"""What an attachment is to the rest of the device: its view, its counts, its limits."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.states import AttachmentState, Reason, attachment_state
from app.store.errors import StoreError

__all__ = [
    "MIB",
    "AttachmentConfig",
    "AttachmentCounts",
    "AttachmentView",
    "StorageBudgetFull",
    "attachment_state",
    "entity_key_of",
    "in_mib",
]

MIB = 1 << 20


@dataclass(frozen=True)
class AttachmentConfig:
    #: The largest file attached (the server's default limit).
    max_bytes: int = 100 * MIB
    #: Bytes of attachments and thumbnails the device keeps; unsent files are never evicted.
    budget_bytes: int = 1024 * MIB
    #: How long a file the server confirmed stays on the device for viewing.
    retention_s: float = 30 * 86400.0
    #: Larger uploads wait for an unmetered link when sync on metered connections is off.
    large_bytes: int = 4 * MIB


@dataclass(frozen=True)
class AttachmentView:
    """One attachment as the CLI and the editor show it."""

    id: str
    entity_id: str
    filename: str
    content_type: str
    size: int
    sha256: str
    state: AttachmentState
    #: Bytes the server holds (``size`` once uploaded).
    offset: int
    #: Why it failed, in words, and as a code; None unless FAILED.
    reason: str | None
    reason_code: Reason | None
    created_at: float
    created_by: str | None
    #: Attached on this device (False: a colleague's, known from the feed).
    mine: bool
    #: Large, not yet uploaded, and sync on metered connections is off.
    waits_for_unmetered: bool
    #: The bytes on this device, or None (a colleague's, or evicted after retention).
    local_path: Path | None

    def as_json(self) -> dict[str, object]:
        """The `fieldsync attachments --json` shape."""
        data: dict[str, object] = {
            "id": self.id,
            "entity_id": self.entity_id,
            "filename": self.filename,
            "content_type": self.content_type,
            "size": self.size,
            "sha256": self.sha256,
            "state": str(self.state),
            "offset": self.offset,
            "created_at": self.created_at,
            "created_by": self.created_by,
            "mine": self.mine,
        }
        if self.state is AttachmentState.FAILED:
            data["reason"] = self.reason
            data["reason_code"] = None if self.reason_code is None else str(self.reason_code)
        return data


@dataclass(frozen=True)
class AttachmentCounts:
    """A work order's attachments, for its list row ("2 photos waiting")."""

    total: int
    waiting: int
    #: Of the waiting ones, photos (``image/*``); the rest are files.
    waiting_images: int = 0
    #: Of the waiting ones, those whose upload failed for good (and of those, photos).
    failed: int = 0
    failed_images: int = 0


class StorageBudgetFull(StoreError):
    """The attachment budget is full of files not yet uploaded: nothing can be evicted."""

    def __init__(self, unsent: int, need: int, budget: int) -> None:
        super().__init__(
            f"Storage for attachments is full of files not yet uploaded ({in_mib(unsent)} of "
            f"{in_mib(budget)}; this file needs {in_mib(need)}). Nothing was saved: let them "
            "upload, or remove some."
        )
        self.unsent = unsent
        self.need = need
        self.budget = budget


def in_mib(size: int) -> str:
    return f"{size / MIB:.1f} MiB"


def entity_key_of(attachment_id: str) -> str:
    """The queue's entity of an attachment's jobs: its upload and its removal, in order."""
    return f"attachment:{attachment_id}"
