"""The file steps the device and the server share (app/disk.py)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from app.disk import file_sha256, fsync_dir


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (5 << 19) + 3])
def test_file_sha256_hashes_the_whole_file_across_its_pieces(tmp_path: Path, size: int) -> None:
    content = os.urandom(size)
    path = tmp_path / "blob"
    path.write_bytes(content)
    assert file_sha256(path) == hashlib.sha256(content).hexdigest()


def test_fsync_dir_needs_a_folder(tmp_path: Path) -> None:
    fsync_dir(tmp_path)
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(NotADirectoryError):
        fsync_dir(tmp_path / "file")
