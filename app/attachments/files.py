"""The bytes of attachments in the data dir, by content: ``attachments/<sha[:2]>/<sha256>``.

A file is copied in whole before its row exists: written to ``attachments/.incoming``, hashed
on the way, fsynced, renamed to its hash and its folder fsynced, so once a row names a hash
the bytes survive a power cut. A copy that fails (unreadable source, full disk) leaves nothing
behind. A crash between the copy and the row leaves an unnamed file: `sweep_orphans` removes
it later. One file serves every attachment with the same content.

Another process (``fieldsync attach`` while the app runs) may have copied a file in whose row
it has not written yet: an attach holds ``attachments.lock`` (beside the folder) shared from
the copy until its row is committed (`adding`), and deleting a file no row names
(`remove_unnamed`) takes it exclusive without waiting, so it never deletes such a file; it
leaves it for a later call (or `sweep_orphans`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import stat
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from app.attachments.model import in_mib
from app.disk import fsync_dir
from app.store.errors import InvalidEditError, StorageFullError, StoreError

__all__ = ["AttachmentFiles", "StoredFile"]

_PIECE = 1 << 20
_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
#: An unnamed file younger than this may be an attach still under way in another process.
ORPHAN_AGE_S = 3600.0


@dataclass(frozen=True)
class StoredFile:
    sha256: str
    size: int
    path: Path


class AttachmentFiles:
    """The content-addressed folder of one data dir."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / "attachments"
        self.incoming = self.root / ".incoming"
        self.thumbnails = data_dir / "thumbnails"
        self.lock_path = data_dir / "attachments.lock"

    def path_for(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    def thumbnail_path(self, attachment_id: str) -> Path:
        return self.thumbnails / f"{attachment_id}.jpg"

    def check_source(self, source: Path, max_bytes: int) -> int:
        """The size of a file that may be attached, or InvalidEditError saying why not."""
        try:
            info = source.stat()
        except FileNotFoundError:
            raise InvalidEditError(f"No such file: {source}") from None
        except OSError as exc:
            raise InvalidEditError(f"Cannot read {source}: {exc.strerror}") from None
        if not stat.S_ISREG(info.st_mode):
            raise InvalidEditError(f"{source} is not a file")
        if info.st_size > max_bytes:
            raise InvalidEditError(
                f"{source} is {in_mib(info.st_size)}, over the limit of {in_mib(max_bytes)}"
            )
        if not os.access(source, os.R_OK):
            raise InvalidEditError(f"Cannot read {source}: permission denied")
        return info.st_size

    def copy_in(self, source: Path, max_bytes: int) -> StoredFile:
        """Copy ``source`` in by its sha256, durably; nothing is left behind on failure."""
        try:
            reader = source.open("rb")
        except OSError as exc:
            raise InvalidEditError(f"Cannot read {source}: {exc.strerror}") from None
        with reader:
            if not stat.S_ISREG(os.fstat(reader.fileno()).st_mode):
                raise InvalidEditError(f"{source} is not a file")
            part = self.incoming / f"{uuid.uuid4().hex}.part"
            try:
                self._mkdirs(self.incoming)
                digest, size = self._write(reader, part, source, max_bytes)
                target = self.path_for(digest)
                self._mkdirs(target.parent)
                os.replace(part, target)
                fsync_dir(target.parent)
            except OSError as exc:
                if exc.errno in _FULL:
                    raise StorageFullError(
                        f"The device storage is full: {source} could not be copied. "
                        "Nothing was saved."
                    ) from None
                raise StoreError(f"Could not copy {source}: {exc.strerror}") from None
            finally:
                with contextlib.suppress(FileNotFoundError):
                    part.unlink()
        return StoredFile(digest, size, target)

    @staticmethod
    def _write(reader: BinaryIO, part: Path, source: Path, max_bytes: int) -> tuple[str, int]:
        digest = hashlib.sha256()
        size = 0
        with part.open("xb") as out:
            while True:
                try:
                    piece = reader.read(_PIECE)
                except OSError as exc:
                    raise InvalidEditError(f"Cannot read {source}: {exc.strerror}") from None
                if not piece:
                    break
                size += len(piece)
                if size > max_bytes:
                    raise InvalidEditError(
                        f"{source} grew past the limit of {in_mib(max_bytes)} while copied"
                    )
                digest.update(piece)
                out.write(piece)
            out.flush()
            os.fsync(out.fileno())
        return digest.hexdigest(), size

    def _mkdirs(self, folder: Path) -> None:
        """Create ``folder`` (and parents) durably: each new entry's parent is fsynced."""
        missing: list[Path] = []
        at = folder
        while not at.exists():
            missing.append(at)
            at = at.parent
        for new in reversed(missing):
            with contextlib.suppress(FileExistsError):
                new.mkdir()
            fsync_dir(new.parent)

    @contextlib.contextmanager
    def adding(self) -> Iterator[None]:
        """Hold off deletions of unnamed files while a copy's row is not yet written
        (shared: attaches in several processes go on side by side)."""
        with self._lock_file() as lock:
            fcntl.flock(lock, fcntl.LOCK_SH)
            yield

    def remove_unnamed(self, sha256: str, named: Callable[[str], bool]) -> int:
        """Delete a content file unless ``named(sha256)`` (asked under the lock) says a row
        still names it; returns the bytes freed. An attach under way holds the lock: then
        nothing is deleted now (a later removal, or `sweep_orphans`, finishes it)."""
        if not self.path_for(sha256).exists():
            return 0
        with self._lock_file() as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return 0
            if named(sha256):
                return 0
            return self.remove(sha256)

    @contextlib.contextmanager
    def _lock_file(self) -> Iterator[int]:
        # Its own open file description each time: flock then also orders this
        # process's threads. Closing it releases the lock.
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            yield fd
        finally:
            os.close(fd)

    def remove(self, sha256: str) -> int:
        """Delete one content file; returns the bytes freed (0 if it was not there)."""
        path = self.path_for(sha256)
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return 0
        return size

    def remove_thumbnail(self, attachment_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.thumbnail_path(attachment_id).unlink()

    def sweep_orphans(self, named: set[str], now: float | None = None) -> int:
        """Delete content files no row names (an attach killed before its row), and old
        pieces of interrupted copies; files younger than an hour are left alone."""
        now = time.time() if now is None else now
        removed = 0
        if not self.root.exists():
            return 0
        for path in self.root.glob("*/*"):
            stale = path.parent == self.incoming or path.name not in named
            with contextlib.suppress(FileNotFoundError):  # gone meanwhile (another process)
                if stale and now - path.stat().st_mtime > ORPHAN_AGE_S:
                    path.unlink()
                    removed += 1
        return removed
