"""Attachment files on disk: content-addressed blobs, one partial file per upload, thumbnails.

    <root>/sha256/ab/abcdef…        one file per distinct content (its sha256 names it)
    <root>/partial/<upload id>     the bytes of one unfinished upload, appended as they arrive
    <root>/thumbnails/ab/abcd….jpg  a JPEG at most 256 px, made on first request

Several server processes may share the root. Each upload has its own partial file, written only
under an exclusive `flock` on it; a finished one is fsynced and renamed onto its blob path in one
atomic step (a second upload of the same bytes renames identical content over it). Thumbnails
are written to a unique temporary name, fsynced and renamed too. Nothing is ever seen half made.

An S3-compatible store would replace this class: a multipart upload per tus upload (a part per
PATCH), completed and copied to `sha256/<hash>` when the whole file matched (docs/attachments.md).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import secrets
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import platformdirs

from app.disk import file_sha256, fsync_dir
from server.errors import UploadLocked
from server.settings import Settings

__all__ = [
    "THUMBNAIL_PX",
    "BlobStore",
    "RunningHashes",
    "UploadBusy",
    "attachments_root",
    "file_sha256",
]

THUMBNAIL_PX = 256


class UploadBusy(UploadLocked):
    """Another request (in this process or another) is writing this upload right now."""


def attachments_root(settings: Settings) -> Path:
    """`attachments_dir`, else `attachments/` beside a SQLite file, else the XDG data dir."""
    if settings.attachments_dir:
        return Path(settings.attachments_dir)
    parsed = urlparse(settings.db_url)
    path = parsed.path[1:]
    if parsed.scheme == "sqlite" and path and path != ":memory:":
        return Path(path).parent / "attachments"
    return Path(platformdirs.user_data_dir("fieldsync-server", appauthor=False)) / "attachments"


class BlobStore:
    """The attachment directory of one server (shared by its processes)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for folder in ("sha256", "partial", "thumbnails"):
            (root / folder).mkdir(parents=True, exist_ok=True)

    def blob_path(self, sha256: str) -> Path:
        return self.root / "sha256" / sha256[:2] / sha256

    def partial_path(self, upload_id: str) -> Path:
        return self.root / "partial" / upload_id

    def thumbnail_path(self, sha256: str) -> Path:
        return self.root / "thumbnails" / sha256[:2] / f"{sha256}.jpg"

    def has_blob(self, sha256: str) -> bool:
        return self.blob_path(sha256).is_file()

    def create_partial(self, upload_id: str) -> None:
        """An empty partial file for a new upload (kept if it is there already)."""
        path = self.partial_path(upload_id)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o640)
        os.close(fd)
        fsync_dir(path.parent)

    @contextlib.contextmanager
    def writing(self, upload_id: str) -> Iterator[int]:
        """A write descriptor on the upload's partial file, held under an exclusive lock.

        Raises `UploadBusy` at once if another request holds it, FileNotFoundError if the
        partial file is gone (completed or terminated meanwhile)."""
        fd = os.open(self.partial_path(upload_id), os.O_WRONLY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise UploadBusy() from None
                raise
            yield fd
        finally:
            os.close(fd)  # releases the lock

    def commit(self, upload_id: str, sha256: str) -> Path:
        """Make the (verified, fsynced) partial file the blob for `sha256`, atomically."""
        blob = self.blob_path(sha256)
        blob.parent.mkdir(parents=True, exist_ok=True)
        os.replace(self.partial_path(upload_id), blob)
        fsync_dir(blob.parent)
        fsync_dir(self.partial_path(upload_id).parent)
        return blob

    def partial_files(self) -> list[Path]:
        return [path for path in (self.root / "partial").iterdir() if path.is_file()]

    def blob_files(self) -> list[Path]:
        return [path for path in (self.root / "sha256").glob("*/*") if path.is_file()]

    def remove_partial(self, upload_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.partial_path(upload_id).unlink()

    def remove_blob(self, sha256: str) -> None:
        for path in (self.blob_path(sha256), self.thumbnail_path(sha256)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def thumbnail(self, sha256: str) -> Path | None:
        """The cached JPEG thumbnail of an image blob (made now if missing); None if the blob
        is not an image Pillow can read."""
        target = self.thumbnail_path(sha256)
        if target.is_file():
            return target
        from PIL import Image, ImageOps, UnidentifiedImageError

        try:
            with Image.open(self.blob_path(sha256)) as image:
                image.draft("RGB", (THUMBNAIL_PX, THUMBNAIL_PX))  # JPEG: decode at low scale
                small = ImageOps.exif_transpose(image)
                small.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
                small = small.convert("RGB")
        except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
            return None
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{secrets.token_hex(8)}")
        try:
            with temporary.open("wb") as stream:
                small.save(stream, "JPEG", quality=80)
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temporary, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
        return target


class RunningHashes:
    """The sha256 state of uploads whose chunks came to this process in order, so that the
    whole-file check at the last byte need not read the file again. A miss (another process
    took a chunk, a restart) only costs that read."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._states: OrderedDict[str, tuple[int, Any]] = OrderedDict()

    def resume(self, upload_id: str, offset: int) -> Any | None:
        """A hash of the file's first `offset` bytes to continue, or None if unknown."""
        if offset == 0:
            return hashlib.sha256()
        found = self._states.get(upload_id)
        if found is None or found[0] != offset:
            return None
        return found[1].copy()

    def keep(self, upload_id: str, offset: int, state: Any) -> None:
        self._states[upload_id] = (offset, state)
        self._states.move_to_end(upload_id)
        while len(self._states) > self.capacity:
            self._states.popitem(last=False)

    def forget(self, upload_id: str) -> None:
        self._states.pop(upload_id, None)
