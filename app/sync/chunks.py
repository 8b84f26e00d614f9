"""An upload's chunks: how big the next one is, and its checksum, made while the last is sent.

`ChunkSizer` aims each chunk at what the link sends in ``target_s``: it starts at 1 MiB, grows
at once to what the link shows, up to ``high`` while no edit waits (the engine sends edits on
their own connection, so they never queue behind a chunk; a larger chunk only amortises the
durable answer the server gives each one), and keeps to ``busy_high`` while edits flow and
after a failure.
`ChecksumAhead` hashes the file on from the end of the chunk on the wire, keeping the digest
at every MiB and the running hash, so the next chunk's ``Upload-Checksum`` is ready whatever
size it is given; the uploader sends a next chunk no larger than what was hashed meanwhile
(`ready_length`), so the wire never waits for a checksum. The file is read in 1 MiB pieces:
the device never holds a chunk in memory.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import threading
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["MIB", "ChecksumAhead", "ChunkSizer", "chunk_checksum", "read_range"]

MIB = 1 << 20
#: A file is read in pieces of this size (for a PATCH body and for its checksum): each piece
#: costs a turn through httpcore, h11 and the transport, so 64 KiB pieces spent as much time
#: there as on the bytes.
PIECE = MIB
T = TypeVar("T")


def _whole_mib(size: int) -> int:
    """Sizes from 1 MiB up fall on a whole MiB, where `ChecksumAhead` keeps a digest."""
    return size - size % MIB if size >= MIB else size


class ChunkSizer:
    """The next chunk's size from the last one's speed: what the link sends in ``target_s``,
    within [``low``, ``high``], or [``low``, ``busy_high``] while an edit waits (`next`). It
    grows at once to what the link shows, shrinks by at most half a step (one slow chunk is
    not a slow link), and halves after a failure."""

    def __init__(
        self,
        start: int = MIB,
        high: int = 8 * MIB,
        *,
        low: int = 256 * 1024,
        target_s: float = 2.0,
        busy_high: int | None = None,
    ) -> None:
        self.high = max(high, 1)
        self.busy_high = min(busy_high or self.high, self.high)
        self.low = min(low, self.busy_high)
        self.size = min(max(start, self.low), self.high)
        self.target_s = target_s
        self._asked: int | None = None

    def next(self, busy: bool = False) -> int:
        """The size of the next chunk: ``size``, or no more than ``busy_high`` while an edit
        waits (an edit arrived: the chunk after the one on the wire is small again)."""
        self._asked = min(self.size, self.busy_high) if busy else self.size
        return self._asked

    def sent(self, size: int, seconds: float) -> int:
        """A chunk of ``size`` went through in ``seconds``: the size of the next."""
        asked = self._asked if self._asked is not None else self.size
        self._asked = None
        if size < asked:  # the file's short tail says nothing of the link
            return self.size
        if seconds > 0:
            wanted = _whole_mib(int(size / seconds * self.target_s))
            self.size = max(min(wanted, self.high), self.size // 2, self.low)
        else:
            self.size = min(self.size * 2, self.high)
        return self.size

    def failed(self) -> int:
        """After a failure: half the size, and no more than ``busy_high``. A cut chunk is sent
        again whole (its checksum covers all of it), so while the link is flaky a chunk stays
        small; it grows again from there (at most threefold a chunk) once chunks go through."""
        self.size = max(min(self.size // 2, self.busy_high), self.low)
        return self.size


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
    wire (`sending`), the file is hashed on from its end, so the next step need not wait: a
    next chunk ending on a whole MiB (or where the hashing stopped) has its digest ready, a
    larger one goes on from the running hash. Holds digests and one hash state, never the
    bytes: memory stays flat."""

    def __init__(self) -> None:
        self._ready: _Hashed | None = None

    def ready_length(self, path: Path, offset: int, wanted: int) -> int:
        """The largest length up to ``wanted`` whose checksum from ``offset`` was made ahead
        (``wanted`` itself when none was: it is made now)."""
        ready = self._ready
        if ready is None or (ready.path, ready.offset) != (path, offset) or wanted in ready.marks:
            return wanted
        return max((mark for mark in ready.marks if mark <= wanted), default=wanted)

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
