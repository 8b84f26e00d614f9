"""Reading from the server: when to pull, records opened in the UI, a busy server's wait.

The engine pulls after every reconnect and every ``pull_interval_s`` (escalations go out
first), and reads records a person opened when they are older than ``stale_after_s``. A server
that answers busy (429/503) or with a reply the device cannot use is online: reads wait as it
asked (Retry-After) or with a growing backoff, not counted as network failures, while
deliveries go on.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Iterable
from typing import TypeVar

from app.events import RecordsChanged
from app.store.backoff import backoff_delay
from app.sync.context import EngineContext, EnginePart
from app.sync.errors import (
    MalformedReplyError,
    ServerBusyError,
    ServerSaturatedError,
    SyncError,
)
from app.sync.outbox import EscalationOutbox
from app.sync.reconcile import Reconciler, ReconcileReport
from app.sync.status import SyncStatus

__all__ = ["Puller"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class Puller(EnginePart):
    def __init__(
        self,
        context: EngineContext,
        reconciler: Reconciler,
        outbox: EscalationOutbox,
        status: SyncStatus,
        *,
        rng: random.Random,
    ) -> None:
        super().__init__(context)
        self.reconciler = reconciler
        self.outbox = outbox
        self.status = status
        self.rng = rng
        #: A pull is due now (start, reconnect, a deferred pull), not only by the interval.
        self.due = True
        #: Records open in the UI or assigned here: revalidated first on reconcile.
        self.priority_ids: set[str] = set()
        #: Records opened since the last read: refreshed when stale.
        self.opened_ids: set[str] = set()
        self._last_pull = float("-inf")
        # A pull the server answered "busy" waits until then (its Retry-After, or a backoff).
        self._not_before = float("-inf")
        self._refused = 0

    # -- when --------------------------------------------------------------------------------

    def waiting_for_server(self) -> bool:
        """The server asked to wait before the next read."""
        return self.clock.monotonic() < self._not_before or self.status.busy_for() > 0

    def pull_due(self) -> bool:
        since = self.clock.monotonic() - self._last_pull
        return self.due or since > self.config().pull_interval_s

    def next_in(self) -> float:
        """Seconds until a read is due (0: now)."""
        now = self.clock.monotonic()
        pull_in = 0.0 if self.due else self.config().pull_interval_s - (now - self._last_pull)
        return max(pull_in, self._not_before - now, self.status.busy_for())

    def open(self, entity_id: str) -> None:
        self.opened_ids.add(entity_id)
        self.priority_ids.add(entity_id)

    def watch(self, entity_ids: Iterable[str]) -> None:
        self.priority_ids = set(entity_ids)

    # -- reads -------------------------------------------------------------------------------

    async def pull(self) -> ReconcileReport | None:
        """Send escalations, pull every page, revalidate the priority records. None: the
        server asked to wait (it answered, so it is online)."""
        return await self._answered(self._pull())

    async def read_opened(self) -> ReconcileReport | None:
        """Refresh the records opened since the last read, if stale. None: deferred."""
        return await self._answered(self._read_opened())

    async def _pull(self) -> ReconcileReport:
        refusals = await self.outbox.send_pending()
        if refusals:
            self.status.last_error = refusals[-1]
        progress = self.status.progress("pull")
        priority = tuple(self.priority_ids)
        try:
            report = await self.reconciler.run(priority, progress.update)
        finally:
            progress.finish()
        self.opened_ids.difference_update(priority)  # just read with the pull
        self._refused = 0
        self.due = False
        self._last_pull = self.clock.monotonic()
        self.status.synced()
        self.status.metrics.reconcile_s = round(report.duration_s, 3)
        self.status.metrics.reconcile_changes = report.changes
        self.status.metrics_dirty = True
        await self.executor.run(self.store.queue.bump, "reconciles")
        if report.changed_ids:
            self.events.publish(RecordsChanged(frozenset(report.changed_ids)))
        return report

    async def _read_opened(self) -> ReconcileReport:
        ids, self.opened_ids = self.opened_ids, set()
        report = ReconcileReport()
        try:
            stale_after_s = self.config().stale_after_s
            await self.reconciler.revalidate(ids, report, stale_after_s=stale_after_s)
        except SyncError:
            self.opened_ids |= ids  # read again later, not forgotten
            raise
        if report.changed_ids:
            self.events.publish(RecordsChanged(frozenset(report.changed_ids)))
        return report

    async def _answered(self, reading: Awaitable[T]) -> T | None:
        try:
            result = await reading
        except (ServerBusyError, MalformedReplyError) as exc:
            self.status.last_error = str(exc)
            self.status.server_answered()
            log.warning("pull deferred: %s", exc)
            backoff = self.store.queue.config.backoff
            if isinstance(exc, ServerSaturatedError) and exc.retry_after is not None:
                # The server said when: exactly then, without growing the backoff.
                self.status.server_busy(exc.retry_after)
                delay = min(exc.retry_after, backoff.cap)
            else:
                self._refused += 1
                delay = backoff_delay(self._refused, backoff, self.rng, retry_after=exc.retry_after)
            self._not_before = self.clock.monotonic() + delay
            self.due = True
            return None
        self.status.server_answered()
        return result
