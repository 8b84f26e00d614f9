"""tus upload locks, as tusd's `lockUpload`: one request at a time on an upload, in every
server process, and a newcomer asks the holder to let go, then waits for it (bounded).

Why: a client whose connection broke mid-PATCH asks HEAD at once, while the server may still
be receiving, fsyncing and recording the cut PATCH's bytes. Answered from the database right
then, HEAD says the old offset and the client sends those bytes again. Under the lock, HEAD
answers only once the holder has stored what it received.

The lock has two layers. In a process, a table of holders (one event loop, so looking and
registering cannot interleave) tells a newcomer whom to ask, and the requests are served in
the order they arrived: a HEAD that comes in while the PATCH before it is still on its way to
the lock (authenticating, finding its row) waits for that PATCH. Across processes, a primitive
that the operating system or the database releases by itself when its holder dies: an
exclusive `flock` on `<root>/locks/<upload id>` (SQLite: one host), or a session advisory
lock on a connection of its own (PostgreSQL: any number of processes, or hosts, on one
database). A holder elsewhere is asked to let go through a marker file beside the lock file,
`<upload id>.release`, which every holder looks for a few times a second; the attachment root
is already shared by every process of a server (the partial files live there).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from server.errors import UploadLocked

if TYPE_CHECKING:
    from server.db.store import Store

__all__ = [
    "AdvisoryLocks",
    "FileLocks",
    "HeldUpload",
    "UploadLocked",
    "UploadLocks",
    "upload_locks",
]

#: How often a waiter tries again, and a holder looks for a release marker.
_POLL_S = 0.02
_WATCH_S = 0.05
#: Names "upload locks" among the database's advisory locks (the schema steps use another).
_ADVISORY_SPACE = 0x4653_5550


class HeldUpload:
    """The lock on one upload while a request holds it; `let_go` is set when a request that
    arrived later asked for it (the holder stores what it has and returns). `since` is when
    the holder's request arrived (epoch seconds)."""

    def __init__(self, upload_id: str, since: float) -> None:
        self.upload_id = upload_id
        self.since = since
        self.let_go = asyncio.Event()


class CrossProcessLocks(Protocol):
    """The part of the lock that other processes see."""

    def try_acquire(self, upload_id: str) -> bool: ...

    def release(self, upload_id: str) -> None: ...


class FileLocks:
    """An exclusive `flock` per upload on `<root>/locks/<upload id>` (one host)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._fds: dict[str, int] = {}

    def try_acquire(self, upload_id: str) -> bool:
        path = self.folder / upload_id
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # A lock file pruned (unlinked) while we waited is not the one others open now.
            if os.fstat(fd).st_ino != os.stat(path).st_ino:
                os.close(fd)
                return False
        except FileNotFoundError:
            os.close(fd)
            return False
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False
            raise
        self._fds[upload_id] = fd
        return True

    def release(self, upload_id: str) -> None:
        fd = self._fds.pop(upload_id, None)
        if fd is not None:
            os.close(fd)  # releases the flock


class AdvisoryLocks:
    """A PostgreSQL session advisory lock per upload, on one connection of this process kept
    for locks alone: the database releases them if the process (or its connection) dies."""

    def __init__(self, connect: Any) -> None:
        self._connect = connect
        self._connection: Any = None
        self._guard = threading.Lock()

    @staticmethod
    def key(upload_id: str) -> int:
        return int(upload_id[:8], 16) - (1 << 31) if len(upload_id) >= 8 else 0

    def _query(self, sql: str, upload_id: str) -> Any:
        with self._guard:
            if self._connection is None or self._connection.closed:
                self._connection = self._connect()
                self._connection.autocommit = True
            with self._connection.cursor() as cursor:
                cursor.execute(sql, (_ADVISORY_SPACE, self.key(upload_id)))
                return cursor.fetchone()[0]

    def try_acquire(self, upload_id: str) -> bool:
        return bool(self._query("SELECT pg_try_advisory_lock(%s, %s)", upload_id))

    def release(self, upload_id: str) -> None:
        self._query("SELECT pg_advisory_unlock(%s, %s)", upload_id)

    def close(self) -> None:
        with self._guard:
            if self._connection is not None and not self._connection.closed:
                self._connection.close()


class UploadLocks:
    """See the module docstring. `hold(upload_id)` is an async context manager."""

    def __init__(self, folder: Path, cross: CrossProcessLocks, *, wait_s: float) -> None:
        self.folder = folder
        self.cross = cross
        self.wait_s = wait_s
        folder.mkdir(parents=True, exist_ok=True)
        self._holders: dict[str, HeldUpload] = {}
        #: When each request on an upload arrived, from its arrival (`arrive`) to its answer:
        #: a request does not take the lock before an earlier one of this process has.
        self._arrivals: dict[str, list[float]] = {}

    def arrive(self, upload_id: str, since: float) -> None:
        """A request on `upload_id` arrived at `since` (called before it does anything)."""
        self._arrivals.setdefault(upload_id, []).append(since)

    def leave(self, upload_id: str, since: float) -> None:
        arrivals = self._arrivals.get(upload_id, [])
        with contextlib.suppress(ValueError):
            arrivals.remove(since)
        if not arrivals:
            self._arrivals.pop(upload_id, None)

    def close(self) -> None:
        if isinstance(self.cross, AdvisoryLocks):
            self.cross.close()

    def marker(self, upload_id: str) -> Path:
        return self.folder / f"{upload_id}.release"

    @contextlib.asynccontextmanager
    async def hold(self, upload_id: str, since: float) -> AsyncIterator[HeldUpload]:
        """The upload's lock for a request that arrived at `since`, once the holder let go
        (only a holder that arrived earlier is asked to); `UploadLocked` after `wait_s`."""
        held = await self._acquire(upload_id, since)
        watcher = asyncio.create_task(self._watch(held))
        try:
            yield held
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            del self._holders[upload_id]
            await asyncio.to_thread(self._release, upload_id)

    async def _acquire(self, upload_id: str, since: float) -> HeldUpload:
        deadline = time.monotonic() + self.wait_s
        while True:
            holder = self._holders.get(upload_id)
            if holder is not None:
                if holder.since < since:
                    holder.let_go.set()
            elif any(earlier < since for earlier in self._arrivals.get(upload_id, ())):
                pass  # an earlier request (a PATCH cut just now) is on its way to the lock
            else:
                held = HeldUpload(upload_id, since)
                self._holders[upload_id] = held  # before any await: the others see it
                if await asyncio.to_thread(self._try_acquire, upload_id, since):
                    return held
                del self._holders[upload_id]
            if time.monotonic() >= deadline:
                raise UploadLocked()
            await asyncio.sleep(_POLL_S)

    def _try_acquire(self, upload_id: str, since: float) -> bool:
        if self.cross.try_acquire(upload_id):
            # A request from before ours is served: its marker is no longer anyone's (a later
            # one still waiting writes it again).
            with contextlib.suppress(FileNotFoundError):
                self.marker(upload_id).unlink()
            return True
        self.marker(upload_id).write_text(repr(since))  # the holder is elsewhere: ask there
        return False

    def _release(self, upload_id: str) -> None:
        self.cross.release(upload_id)

    async def _watch(self, held: HeldUpload) -> None:
        """Set `let_go` once another process left a release marker from a later request."""
        marker = self.marker(held.upload_id)
        while not held.let_go.is_set():
            await asyncio.sleep(_WATCH_S)
            if _asked_since(marker) > held.since:
                held.let_go.set()

    def prune(self, live: set[str], older_than: float) -> int:
        """Remove the lock files of uploads that are gone (kept `older_than` epoch seconds)."""
        removed = 0
        for path in self.folder.iterdir():
            upload_id = path.name.removesuffix(".release")
            if upload_id in live or upload_id in self._holders:
                continue
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_mtime < older_than:
                    path.unlink()
                    removed += 1
        return removed


def _asked_since(marker: Path) -> float:
    """When the latest request waiting elsewhere arrived (0: none, or half written)."""
    try:
        return float(marker.read_text() or 0)
    except (FileNotFoundError, ValueError):
        return 0.0


def upload_locks(store: Store, folder: Path, wait_s: float) -> UploadLocks:
    """Advisory locks on PostgreSQL, file locks in `folder` on SQLite."""
    cross: CrossProcessLocks
    if store.is_postgres:
        import psycopg2

        database = store.db

        def connect() -> Any:
            return psycopg2.connect(dbname=database.database, **database.connect_params)

        cross = AdvisoryLocks(connect)
    else:
        cross = FileLocks(folder)
    return UploadLocks(folder, cross, wait_s=wait_s)
