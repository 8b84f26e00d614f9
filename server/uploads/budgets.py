"""Upload budgets: what one device may have in flight, what one user may keep, and the free
disk that uploads leave to everything else.

- A device's unfinished uploads may announce at most `device_unfinished_bytes` together
  (a phone stuck resending, or a client gone wrong, cannot fill the disk with partial files).
- A user's stored files (live attachments uploaded from any of their devices) plus their
  unfinished uploads may reach at most `user_stored_bytes`.
- Uploads stop `min_free_disk_bytes` short of a full disk on the attachment directory's
  filesystem: a new upload that would cross that floor is refused, and a PATCH stops writing
  there. The database's writes (edits) keep that room, so an edit never fails because photos
  filled the disk.

A file that could never fit (larger than a whole budget) is refused with 413, like a file over
`max_upload_bytes`: waiting will not help. A budget that is full now, or a disk at its floor,
answers 507 Insufficient Storage (RFC 4918, WebDAV's answer for a full quota): it clears once
other uploads finish, files are removed or the disk is grown, so clients retry later and keep
the file. Budgets are checked in the transaction that creates the upload; on PostgreSQL two
creations of one user racing on two devices can pass a budget by one file.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import peewee as pw

from server.auth import AuthenticatedDevice
from server.db.store import Store
from server.errors import (
    InsufficientStorage,
    StorageBudgetExceeded,
    TooLarge,
    UploadBudgetExceeded,
)
from server.settings import Settings

__all__ = [
    "DeviceUse",
    "check_new_upload",
    "device_use",
    "free_disk_bytes",
    "insufficient_storage",
    "mib",
]

_MIB = 1024 * 1024


def mib(size: int) -> str:
    return f"{size / _MIB:.1f} MiB"


@dataclass(frozen=True)
class DeviceUse:
    """What one device holds on the server: bytes announced by its unfinished uploads, and
    the size of the live attachments it uploaded."""

    unfinished: int = 0
    stored: int = 0


def free_disk_bytes(root: Path) -> int:
    """Bytes a writer may still use on the filesystem holding `root`."""
    return shutil.disk_usage(root).free


def insufficient_storage(
    settings: Settings, *, offset: int | None = None, body_unread: bool = False
) -> InsufficientStorage:
    floor = mib(settings.min_free_disk_bytes)
    detail = f"the server keeps {floor} of disk free for edits; uploads wait until there is room"
    return InsufficientStorage(detail, offset=offset, body_unread=body_unread)


def _unfinished(store: Store, devices: list[int]) -> int:
    uploads = store.tables.Upload
    total = (
        uploads.select(pw.fn.COALESCE(pw.fn.SUM(uploads.length), 0))
        .where(uploads.device_id.in_(devices), uploads.complete == False)  # noqa: E712
        .scalar()
    )
    return int(total or 0)


def _stored(store: Store, device_names: list[str]) -> int:
    attachments = store.tables.Attachment
    total = (
        attachments.select(pw.fn.COALESCE(pw.fn.SUM(attachments.size), 0))
        .where(attachments.created_by.in_(device_names), attachments.deleted == False)  # noqa: E712
        .scalar()
    )
    return int(total or 0)


def check_new_upload(
    store: Store, settings: Settings, root: Path, device: AuthenticatedDevice, length: int
) -> None:
    """Refuse a new upload of `length` bytes that a budget or the disk floor has no room for
    (TooLarge if it never could fit, a `NoRoom` error if not now)."""
    device_limit, user_limit = settings.device_unfinished_bytes, settings.user_stored_bytes
    for limit, whose in ((device_limit, "this device's unfinished uploads"),
                         (user_limit, "a user's stored files")):  # fmt: skip
        if length > limit:
            detail = f"{whose} may total at most {mib(limit)}"
            raise TooLarge(detail)
    unfinished = _unfinished(store, [device.id])
    if unfinished + length > device_limit:
        detail = (
            f"this device's unfinished uploads would pass {mib(device_limit)}"
            f" ({mib(unfinished)} now): finish or cancel them first"
        )
        raise UploadBudgetExceeded(detail)
    table = store.tables.Device
    user = device.user or device.name
    rows = list(table.select(table.id, table.name).where(table.user_name == user))
    ids = [row.id for row in rows] or [device.id]
    names = [row.name for row in rows] or [device.name]
    held = _stored(store, names) + _unfinished(store, ids)
    if held + length > user_limit:
        detail = f"{user}'s files would pass {mib(user_limit)} ({mib(held)} now)"
        raise StorageBudgetExceeded(detail)
    if free_disk_bytes(root) - length < settings.min_free_disk_bytes:
        raise insufficient_storage(settings)


def device_use(store: Store) -> dict[str, DeviceUse]:
    """Each device's use, by device name (for `list-devices`)."""
    devices, uploads, attachments = (
        store.tables.Device,
        store.tables.Upload,
        store.tables.Attachment,
    )
    names = {row.id: row.name for row in devices.select(devices.id, devices.name)}
    unfinished: dict[str, int] = {}
    pending: Iterable[tuple[Any, ...]] = (
        uploads.select(uploads.device_id, pw.fn.SUM(uploads.length))
        .where(uploads.complete == False)  # noqa: E712
        .group_by(uploads.device_id)
        .tuples()  # type: ignore[assignment]
    )
    for device_id, total in pending:
        if device_id in names:
            unfinished[names[device_id]] = int(total)
    live: Iterable[tuple[Any, ...]] = (
        attachments.select(attachments.created_by, pw.fn.SUM(attachments.size))
        .where(attachments.deleted == False)  # noqa: E712
        .group_by(attachments.created_by)
        .tuples()  # type: ignore[assignment]
    )
    stored = {name: int(total) for name, total in live}
    return {
        name: DeviceUse(unfinished.get(name, 0), stored.get(name, 0)) for name in names.values()
    }
