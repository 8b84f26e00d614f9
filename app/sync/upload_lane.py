"""Uploads beside the engine's loop: one step at a time, in a task of its own.

The loop claims a step when nothing else is due (`start`) and goes on at once: while the
chunk is on the wire (on the uploader's own connections, `ServerClient.bulk`), edits are
flushed and pulls run on the engine's pool, never behind it. The step's end wakes the loop,
which collects its outcome there (`collect`: an `AuthError` or a storage condition is raised
in the loop, as a flush's would be), sends what was queued meanwhile, and only then starts
the next step: an upload stops at a chunk boundary while edits go. Edits seen within
``quiet_s`` keep the next chunks small (`edits_waiting`, `app.sync.chunks.ChunkSizer.next`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Callable

from app.store.errors import StorageConditionError
from app.sync.context import EngineContext
from app.sync.errors import SyncError
from app.sync.status import SyncStatus
from app.sync.transport import ServerClient
from app.sync.uploader import Uploader

__all__ = ["UploadLane"]

log = logging.getLogger(__name__)


class UploadLane:
    """The engine's uploads: at most one step running, owned here and awaited here."""

    def __init__(
        self,
        context: EngineContext,
        client: ServerClient,
        status: SyncStatus,
        worker_id: str,
        wake: Callable[[], None],
    ) -> None:
        #: Its tus requests on connections of their own; thumbnails on the engine's.
        self.uploader = Uploader(
            context,
            client.bulk(),
            status,
            worker_id=worker_id,
            reads=client,
            edits_waiting=self.edits_waiting,
        )
        self._config = context.config
        self._wake = wake
        self._clock = context.clock
        self._task: asyncio.Task[None] | None = None
        self._edit_at = -math.inf
        #: Something may have become ready since a claim found nothing (`look_again`).
        self._look = True

    @property
    def running(self) -> bool:
        """A step is on the wire (or its outcome is not collected yet)."""
        return self._task is not None

    def edits_sent(self) -> None:
        """The loop sent edits: for ``quiet_s``, chunks keep small."""
        self._edit_at = self._clock.monotonic()

    def edits_waiting(self) -> bool:
        return self._clock.monotonic() - self._edit_at < self._config().upload_quiet_s

    def collect(self) -> None:
        """The ended step's outcome, raised here if it failed."""
        task = self._task
        if task is not None and task.done():
            self._task = None
            task.result()

    def look_again(self) -> None:
        """The loop woke (an enqueue, a due time, a step's end): the next `start` claims."""
        self._look = True

    async def start(self) -> bool:
        """Claim the next step and run it beside the loop (False: one is running already, or
        none was ready, now or since the loop last woke: an idle engine claims no more)."""
        if self._task is not None or not self._look:
            return False
        claimed = await self.uploader.claim()
        if claimed is None:
            self._look = False
            return False
        self._task = asyncio.ensure_future(self.uploader.advance(claimed))
        self._task.add_done_callback(lambda _: self._ended())
        return True

    def _ended(self) -> None:
        self._look = True  # the job is back in the queue, due now
        self._wake()

    @contextlib.asynccontextmanager
    async def settling(self) -> AsyncIterator[None]:
        """Around the engine's loop: once it ends, the step on the wire is waited for (a stop
        gives it its grace) or, if the loop failed or was cancelled, cut; then an unfinished
        step's lease goes back to the queue."""
        try:
            yield
        except BaseException:
            await self.settle(cancel=True)
            await self.uploader.release_in_flight()
            raise
        await self.settle(cancel=False)
        await self.uploader.release_in_flight()

    async def settle(self, *, cancel: bool) -> None:
        """The loop ends: wait for the step on the wire (cancelled with ``cancel``, or when
        this wait is). Its network or storage failure is only logged now: the job keeps its
        place in the queue."""
        task, self._task = self._task, None
        if task is None:
            return
        if cancel:
            task.cancel()
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            task.cancel()
            await asyncio.wait({task})
            raise
        if task.cancelled():
            return
        error = task.exception()
        if isinstance(error, SyncError | StorageConditionError):
            log.info("an upload step ended with the engine: %s", error)
        elif error is not None:
            raise error
