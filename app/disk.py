"""Files on disk as the device and the server both handle them: hashed whole, made durable."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["file_sha256", "fsync_dir"]

_PIECE = 1 << 20


def file_sha256(path: Path) -> str:
    """Hex sha256 of a whole file, read in pieces."""
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while piece := source.read(_PIECE):
            digest.update(piece)
    return digest.hexdigest()


def fsync_dir(path: Path) -> None:
    """Make a rename or a new entry in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
