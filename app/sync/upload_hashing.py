"""The hash-ahead reader: a chunk's ``Upload-Checksum``, made while the chunk before it is sent."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import threading
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from app.sync.chunks import MIB, ChunkSizer

__all__ = ["PIECE", "ChecksumAhead", "chunk_checksum", "read_range"]

#: A file is read in pieces of this size (for a PATCH body and for its checksum): each piece
#: costs a turn through httpcore, h11 and the transport, so 64 KiB pieces spent as much time
#: there as on the bytes.
PIECE = MIB
#: While a chunk is on the wire the file is hashed on as far as a next chunk this many times
#: larger: the next chunk is at most that (`ChecksumAhead.ready_length`), so it never waits
#: for its checksum. sha256 runs ~4x faster than loopback carries the bytes (1.6 GB/s against
#: ~400 MB/s here), so 3x is hashed before the answer comes; a slow link wastes a little
#: hashing of bytes the next chunk leaves for later (none once chunks are at the limit).
_AHEAD_GROWTH = 3
T = TypeVar("T")


def read_range(path: Path, offset: int, length: int) -> Iterator[bytes]:
    """The file's bytes [offset, offset + length) in pieces of `PIECE`."""
    with path.open("rb") as source:
        source.seek(offset)
        left = length
        while left:
            piece = source.read(min(PIECE, left))
            if not piece:
                raise OSError(f"{path} is shorter than expected")
            left -= len(piece)
            yield piece


def _checksum(digest: Any) -> str:
    return "sha256 " + base64.b64encode(digest.digest()).decode()


def chunk_checksum(path: Path, offset: int, length: int) -> str:
    """``sha256 <base64>`` of the file's bytes [offset, offset + length)."""
    digest = hashlib.sha256()
    for piece in read_range(path, offset, length):
        digest.update(piece)
    return _checksum(digest)


@dataclass
class _Hashed:
    """The file hashed from ``offset`` on: ``hashed`` bytes so far, the digest at every whole
    MiB of them (and at their end), and the running hash to go on from."""

    path: Path
    offset: int
    hashed: int = 0
    running: Any = field(default_factory=hashlib.sha256)
    marks: dict[int, str] = field(default_factory=dict)

    def extend(self, length: int, stop: threading.Event | None = None) -> _Hashed:
        """Blocking: hash on up to ``length`` bytes from ``offset`` (less if ``stop`` is set)."""
        start = self.offset + self.hashed
        for piece in read_range(self.path, start, length - self.hashed):
            if stop is not None and stop.is_set():
                break
            self.running.update(piece)
            self.hashed += len(piece)
            if self.hashed % MIB == 0 or self.hashed == length:
                self.marks[self.hashed] = _checksum(self.running.copy())
        return self


class ChecksumAhead:
    """``Upload-Checksum`` of a chunk, read and hashed in a thread. While a chunk is on the
    wire (`sending`), the file is hashed on from its end, keeping the digest at every MiB and
    the running hash, so the next step need not wait: a next chunk ending on a whole MiB (or
    where the hashing stopped) has its digest ready, a larger one goes on from the running
    hash; the uploader sends a next chunk no larger than what was hashed meanwhile
    (`ready_length`, `next_chunk`), so the wire never waits for a checksum. The file is read
    in 1 MiB pieces: holds digests and one hash state, never the bytes, so memory stays flat."""

    def __init__(self) -> None:
        self._ready: _Hashed | None = None

    def ready_length(self, path: Path, offset: int, wanted: int) -> int:
        """The largest length up to ``wanted`` whose checksum from ``offset`` was made ahead
        (``wanted`` itself when none was: it is made now)."""
        ready = self._ready
        if ready is None or (ready.path, ready.offset) != (path, offset) or wanted in ready.marks:
            return wanted
        return max((mark for mark in ready.marks if mark <= wanted), default=wanted)

    async def next_chunk(
        self, path: Path, offset: int, wanted: int, size: int
    ) -> tuple[int, str | None]:
        """The length of the chunk from ``offset`` of a file of ``size`` (``wanted`` at most,
        ending where the hashing ahead got) and its checksum. The last chunk has none: the
        whole file's sha256, which the server checks at the last byte, covers it (and a cut
        one keeps what arrived). Hashing it as well cost each side a pass over most of the
        file on a fast link. So a ``wanted`` that reaches the end goes whole, however far
        the hashing ahead got: stopping there would cost a chunk's round trip for nothing."""
        if offset + wanted >= size:
            self._ready = None
            return wanted, None
        length = self.ready_length(path, offset, wanted)
        if offset + length >= size:
            return length, None
        return length, await self.checksum(path, offset, length)

    async def sending_chunk(
        self, request: Awaitable[T], path: Path, offset: int, length: int, size: int,
        sizer: ChunkSizer,
    ) -> T:  # fmt: skip
        """Await ``request``, the chunk [offset, offset + length), while the file is hashed on
        from its end as far as a chunk `_AHEAD_GROWTH` times larger reaches (the sizer may
        grow at once); not when the next chunk likely takes the rest, which needs no
        checksum."""
        after = offset + length
        rest = size - after
        ahead = 0 if rest <= sizer.size else min(length, rest)
        most = min(length * _AHEAD_GROWTH, sizer.high, rest)
        return await self.sending(request, path, after, ahead, most)

    async def checksum(self, path: Path, offset: int, length: int) -> str:
        ready, self._ready = self._ready, None
        if ready is not None and (ready.path, ready.offset) == (path, offset):
            mark = ready.marks.get(length)
            if mark is not None:
                return mark
            if length > ready.hashed:
                return (await asyncio.to_thread(ready.extend, length)).marks[length]
        return await asyncio.to_thread(chunk_checksum, path, offset, length)

    async def sending(
        self, request: Awaitable[T], path: Path, offset: int, length: int, most: int = 0
    ) -> T:
        """Await ``request`` while [offset, offset + length) is hashed (nothing if ``length``
        is 0), and on up to ``most`` bytes if more. A failed request drops it: the next chunk
        may be another."""
        if length <= 0:
            return await request
        stop = threading.Event()
        hashed = _Hashed(path, offset)

        def hash_ahead() -> _Hashed:  # a digest at ``length`` too, if it is not a whole MiB
            return hashed.extend(length, stop).extend(max(length, most), stop)

        ahead = asyncio.ensure_future(asyncio.to_thread(hash_ahead))
        try:
            result = await request
        except BaseException:
            stop.set()  # the thread ends at its next piece; nobody waits for it
            ahead.cancel()
            raise
        try:
            self._ready = await ahead
        except OSError:
            self._ready = None  # unreadable now: the next step reads it again and says so
        return result
