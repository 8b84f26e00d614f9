"""An upload's chunks: how big the next one is, from how fast the last one went.

`ChunkSizer` aims each chunk at what the link sends in ``target_s``: it starts at 1 MiB, grows
at once to what the link shows, up to ``high`` while no edit waits (the engine sends edits on
their own connection, so they never queue behind a chunk; a larger chunk only amortises the
durable answer the server gives each one), and keeps to ``busy_high`` while edits flow and
after a failure. Each chunk's checksum is `app.sync.upload_hashing`'s.
"""

from __future__ import annotations

__all__ = ["MIB", "ChunkSizer"]

MIB = 1 << 20


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
