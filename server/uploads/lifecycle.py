"""The tus upload's life in the database: created once per `attachment_id`, its offset moved
forward chunk by chunk, and, once the whole file matched its sha256, an attachment of the work
order (with a change number of its own, so the work order's version never moves).

The `attachment_id` a device fixes when the file is attached is the upload's idempotency key:
the unique index on it decides a race between two POSTs, and a POST repeated (a lost 201, an app
restart) finds the same upload. The offset in the database is what HEAD reports and PATCH
checks; it only moves after the bytes before it were fsynced, so a server killed mid-PATCH
resumes from the last chunk it acknowledged (the partial file is cut back to it).
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from server.access import Action, Allowed
from server.auth import AuthenticatedDevice
from server.db.models import Upload
from server.db.store import Store
from server.errors import (
    DomainError,
    InvalidInput,
    KeyReused,
    NotFound,
    TooLarge,
    UnsupportedMediaType,
    UploadExpired,
)
from server.records.mutations import now_iso
from server.settings import Settings
from server.uploads.blobs import BlobStore
from server.uploads.budgets import check_new_upload
from server.wire import wire_entity_id

if TYPE_CHECKING:
    from server.gate import Gate

__all__ = [
    "METADATA_KEYS",
    "UploadRequest",
    "complete_upload",
    "content_type_allowed",
    "create_or_resume",
    "find_upload",
    "move_offset",
    "own_upload",
    "parse_upload_request",
    "prune_expired_uploads",
    "prune_unused_files",
    "terminate_held_upload",
    "terminate_upload",
    "unfinished_upload_ids",
]

#: The `Upload-Metadata` keys a Fieldsync upload carries, all required.
METADATA_KEYS = ("attachment_id", "entity_id", "filename", "content_type", "sha256")
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MEDIA_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$")


@dataclass(frozen=True)
class UploadRequest:
    """A POST's announced file, checked."""

    attachment_id: str
    entity_id: str
    filename: str
    content_type: str
    sha256: str
    length: int


def _metadata(header: str | None) -> dict[str, str]:
    """tus `Upload-Metadata`: comma-separated `key base64(value)` pairs."""
    found: dict[str, str] = {}
    for pair in (header or "").split(","):
        if not pair.strip():
            continue
        key, _, encoded = pair.strip().partition(" ")
        if key in found:
            raise InvalidInput(f"Upload-Metadata: {key[:40]!r} given twice")
        try:
            found[key] = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise InvalidInput(
                f"Upload-Metadata: {key[:40]!r} is not base64 of UTF-8 text"
            ) from None
    return found


def parse_upload_request(
    length: str | None, metadata_header: str | None, settings: Settings
) -> UploadRequest:
    """The POST's headers as an `UploadRequest`; InvalidInput, TooLarge or
    UnsupportedMediaType with the reason."""
    if length is None or not (length.isascii() and length.isdigit()) or len(length) > 19:
        raise InvalidInput("Upload-Length: the file's size in bytes is required")
    size = int(length)
    metadata = _metadata(metadata_header)
    missing = [key for key in METADATA_KEYS if key not in metadata]
    if missing:
        raise InvalidInput(f"Upload-Metadata: missing {', '.join(missing)}")
    attachment_id = wire_entity_id(metadata["attachment_id"])
    entity_id = wire_entity_id(metadata["entity_id"])
    if attachment_id is None or entity_id is None:
        raise InvalidInput("Upload-Metadata: attachment_id and entity_id must be UUIDs")
    if not _SHA256.match(metadata["sha256"]):
        raise InvalidInput("Upload-Metadata: sha256 must be 64 hex digits")
    filename = metadata["filename"]
    if not filename.strip() or len(filename) > 255 or _CONTROL.search(filename):
        raise InvalidInput("Upload-Metadata: filename must be 1-255 printable characters")
    content_type = metadata["content_type"].split(";")[0].strip().lower()
    if not _MEDIA_TYPE.match(content_type):
        raise InvalidInput("Upload-Metadata: content_type must be a media type like image/jpeg")
    if size > settings.max_upload_bytes:
        limit = settings.max_upload_bytes
        raise TooLarge(f"at most {limit} bytes")
    if not content_type_allowed(content_type, settings):
        allowed = ", ".join(settings.attachment_content_types)
        raise UnsupportedMediaType(f"allowed: {allowed}")
    return UploadRequest(
        attachment_id, entity_id, filename, content_type, metadata["sha256"].lower(), size
    )


def content_type_allowed(content_type: str, settings: Settings) -> bool:
    family = content_type.split("/")[0] + "/*"
    allowed = {pattern.lower() for pattern in settings.attachment_content_types}
    return content_type in allowed or family in allowed


def find_upload(store: Store, device_id: int, upload_id: str) -> Upload | None:
    """The device's own upload (another device's is as good as missing)."""
    table = store.tables.Upload
    row: Upload | None = table.get_or_none(table.id == upload_id, table.device_id == device_id)
    return row


def own_upload(
    store: Store, blobs: BlobStore, settings: Settings, device_id: int, upload_id: str
) -> Upload:
    """The device's upload; NotFound if missing or another device's, UploadExpired if it
    outlived its `Upload-Expires` (it is removed now)."""
    row = find_upload(store, device_id, upload_id)
    if row is None:
        raise NotFound()
    if not row.complete and row.expires_at <= settings.clock():
        terminate_upload(store, blobs, row)
        raise UploadExpired()
    return row


def _same_file(row: Upload, request: UploadRequest) -> bool:
    return (row.length, row.sha256, row.entity_id) == (
        request.length,
        request.sha256,
        request.entity_id,
    )


def create_or_resume(
    store: Store,
    blobs: BlobStore,
    settings: Settings,
    device: AuthenticatedDevice,
    request: UploadRequest,
    gate: Gate,
) -> Upload:
    """The upload for `request.attachment_id`: the existing one, or a new one (NotFound if the
    work order does not exist or the access rule hides it from the device, KeyReused if the id
    came with another file)."""
    table = store.tables.Upload
    now = settings.clock()
    existing: Upload | None = table.get_or_none(table.attachment_id == request.attachment_id)
    if existing is not None and not existing.complete and existing.expires_at <= now:
        # Expired: the device starts over under the same id.
        terminate_upload(store, blobs, existing)
        existing = None
    if existing is not None:
        return _answer_existing(existing, device, request)
    orders = store.tables.WorkOrder
    order = orders.get_or_none(orders.id == request.entity_id)
    allowed = isinstance(gate.order(Action.ATTACH, request.entity_id, order), Allowed)
    if order is None or order.deleted or not allowed:
        raise NotFound()
    upload_id = secrets.token_hex(16)
    values = {
        "id": upload_id,
        "device_id": device.id,
        "attachment_id": request.attachment_id,
        "entity_id": request.entity_id,
        "filename": request.filename,
        "content_type": request.content_type,
        "sha256": request.sha256,
        "length": request.length,
        "offset": 0,
        "expires_at": now + settings.upload_expiry_seconds,
        "complete": False,
    }
    blobs.create_partial(upload_id)
    try:
        with store.db.atomic():  # on SQLite, the budgets' sums and the insert are one writer
            check_new_upload(store, settings, blobs.root, device, request.length)
            table.insert(**values).on_conflict_ignore().execute()
    except DomainError:
        blobs.remove_partial(upload_id)
        raise
    row: Upload = table.get(table.attachment_id == request.attachment_id)
    if row.id != upload_id:  # a concurrent POST of the same attachment won
        blobs.remove_partial(upload_id)
        return _answer_existing(row, device, request)
    return row


def _answer_existing(row: Upload, device: AuthenticatedDevice, request: UploadRequest) -> Upload:
    if row.device_id != device.id or not _same_file(row, request):
        raise KeyReused()
    return row


def move_offset(store: Store, settings: Settings, row: Upload, offset: int) -> None:
    """Record that the partial file holds `offset` fsynced bytes (0: the upload restarts)."""
    table = store.tables.Upload
    expires_at = settings.clock() + settings.upload_expiry_seconds
    with store.db.atomic():
        table.update(offset=offset, expires_at=expires_at).where(
            table.id == row.id,
            table.complete == False,  # noqa: E712 - peewee's SQL
        ).execute()
    row.offset = offset
    row.expires_at = expires_at


def complete_upload(store: Store, blobs: BlobStore, row: Upload, device_name: str) -> None:
    """The whole file matched: store it under its hash, attach it to the work order."""
    if row.length == 0 or not blobs.has_blob(row.sha256) or blobs.partial_path(row.id).exists():
        blobs.commit(row.id, row.sha256)
    attachments = store.tables.Attachment
    uploads = store.tables.Upload
    orders = store.tables.WorkOrder
    with store.write_transaction() as sequence:
        # Its entries follow the work order's keys: no write of it may move them meanwhile.
        store.for_update(orders.select(orders.id).where(orders.id == row.entity_id)).first()
        attachments.insert(
            id=row.attachment_id,
            entity_id=row.entity_id,
            filename=row.filename,
            content_type=row.content_type,
            size=row.length,
            sha256=row.sha256,
            created_at=now_iso(),
            created_by=device_name,
            deleted=False,
            seq=sequence.next(),
        ).on_conflict_ignore().execute()
        uploads.update(offset=row.length, complete=True).where(uploads.id == row.id).execute()
    row.offset = row.length
    row.complete = True


def terminate_upload(store: Store, blobs: BlobStore, row: Upload) -> bool:
    """Remove an unfinished upload and its bytes; False if it completed meanwhile."""
    table = store.tables.Upload
    with store.db.atomic():
        removed = (
            table.delete()
            .where(table.id == row.id, table.complete == False)  # noqa: E712
            .execute()
        )
    if removed:
        blobs.remove_partial(row.id)
    return bool(removed)


def unfinished_upload_ids(store: Store) -> set[str]:
    table = store.tables.Upload
    return {row.id for row in table.select(table.id).where(table.complete == False)}  # noqa: E712


def terminate_held_upload(store: Store, blobs: BlobStore, row: Upload) -> bool:
    """`terminate_upload` for a request holding the upload's lock, once no writer of its
    partial file is left (`UploadBusy` if one is)."""
    try:
        with blobs.writing(row.id):
            return terminate_upload(store, blobs, row)
    except FileNotFoundError:
        return terminate_upload(store, blobs, row)


def prune_expired_uploads(store: Store, blobs: BlobStore, settings: Settings) -> int:
    """Remove unfinished uploads past their `Upload-Expires`; return how many."""
    table = store.tables.Upload
    expired = list(
        table.select().where(
            table.complete == False,  # noqa: E712
            table.expires_at <= settings.clock(),
        )
    )
    return sum(terminate_upload(store, blobs, row) for row in expired)


#: A blob younger than this is never collected: it may be an upload's file renamed into place
#: whose attachment row is still being written by another process.
_BLOB_GRACE_SECONDS = 3600.0


def prune_unused_files(store: Store, blobs: BlobStore, settings: Settings) -> int:
    """Remove files no row needs any more; return how many: partial files without an upload
    (a POST that died between the file and its row) once they are as old as an expired
    upload, and the content of removed attachments that no live attachment shares."""
    now = settings.clock()
    attachments = store.tables.Attachment
    removed = 0
    known = unfinished_upload_ids(store)
    for path in blobs.partial_files():
        if path.name not in known and path.stat().st_mtime < now - settings.upload_expiry_seconds:
            blobs.remove_partial(path.name)
            removed += 1
    live = {
        row.sha256
        for row in attachments.select(attachments.sha256).where(attachments.deleted == False)  # noqa: E712
    }
    for path in blobs.blob_files():
        if path.name not in live and path.stat().st_mtime < now - _BLOB_GRACE_SECONDS:
            blobs.remove_blob(path.name)
            removed += 1
    return removed
