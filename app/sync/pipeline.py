"""The delivery pipeline: claim queued jobs, send them, record the replies, tell the UI.

One `flush` keeps up to ``delivery_pipeline`` batches on the wire: as soon as one batch's reply
arrives, the next batch is claimed and sent, and only then is the reply recorded, so the server
works while the device does its bookkeeping. Claims never hold two jobs of one work order, so
per-record order is kept. Every batch started here is awaited here (no fire-and-forget); the
first error is raised once all have ended. Each batch publishes its jobs' states twice (leased,
then their outcomes) as one event each, and the flush publishes "n of m" progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.events import (
    ConflictRaised,
    JobStateChanged,
    JobStatesChanged,
    RecordsChanged,
)
from app.states import RETRYING, JobStatus, job_state
from app.store.db import connection
from app.store.errors import StorageConditionError, storage_errors
from app.store.jobs import TOPIC_WORK_ORDERS
from app.store.queue import ClaimedJob
from app.store.store import Store
from app.sync.clock import Sleep
from app.sync.context import EngineContext, EnginePart
from app.sync.delivery import DeliveryReport, apply_replies, build_mutations
from app.sync.errors import TransientError, saturated
from app.sync.ratelimit import TokenBucket
from app.sync.status import PhaseProgress, SyncStatus
from app.sync.sync_now import SyncReport
from app.sync.transport import BatchItem, Reply, ServerClient

__all__ = ["DeliveryPipeline", "FlushReport", "job_states_now"]

log = logging.getLogger(__name__)

# Pending jobs a flush will send: due now, and not held behind an earlier job of their work
# order that waits for a person (conflict, dead) or for a later retry.
_READY_COUNT = (
    "SELECT COUNT(*) FROM jobs AS j WHERE j.status = 'pending' AND j.next_attempt_at <= ? "
    f"AND j.topic = '{TOPIC_WORK_ORDERS}' "
    "AND NOT EXISTS (SELECT 1 FROM jobs AS e WHERE e.entity_key = j.entity_key "
    "AND e.id < j.id AND e.finished_at IS NULL AND (e.status IN ('conflict', 'dead') "
    "OR (e.status = 'pending' AND e.next_attempt_at > ?)))"
)


@dataclass
class FlushReport:
    """What one flush did: how many jobs were answered (how they ended goes to the
    `SyncReport` of a person who asked, `flush(tally=...)`)."""

    handled: int = 0
    #: The last batch met a network failure: the link is down, do not go on at once.
    unreachable: bool = False


def _claim(
    store: Store, worker_id: str, limit: int, count_rest: bool
) -> tuple[list[ClaimedJob], list[dict[str, Any]], int]:
    """Claim a batch and build its request bodies, in one trip to the store thread; for a
    flush's first batch, also count the jobs ready after it.

    One trip, not two: the store thread is one, and the previous batch's reply is queued
    for it right after this claim. Built in a second trip, the next request would wait
    behind that whole record, and the server, with nothing else on the wire, would wait
    with it."""
    jobs = store.queue.claim(worker_id, limit)
    if not jobs:
        return jobs, [], 0
    try:
        mutations = build_mutations(store, jobs)
    except BaseException:
        with contextlib.suppress(StorageConditionError):
            store.queue.release(jobs)  # not sent: the next flush takes them at once
        raise
    if not count_rest:
        return jobs, mutations, 0
    now = store.clock()
    with storage_errors(store.path):
        (rest,) = connection(store.db).execute(_READY_COUNT, (now, now)).fetchone()
    return jobs, mutations, int(rest)


def _apply(
    store: Store,
    results: list[tuple[ClaimedJob, dict[str, Any], Reply | TransientError]],
    duration_ms: float,
) -> tuple[DeliveryReport, tuple[JobStateChanged, ...]]:
    """Record the replies, then read back where each job ended, in one trip to the store."""
    report = apply_replies(store, results, duration_ms)
    return report, job_states_now(store, [job.id for job, _, _ in results])


def job_states_now(store: Store, job_ids: list[int]) -> tuple[JobStateChanged, ...]:
    """Where each of ``job_ids`` is now, as the engine publishes it after a reply (blocking:
    run it on the executor)."""
    marks = ",".join("?" * len(job_ids))
    with storage_errors(store.path):
        rows = connection(store.db).execute(
            "SELECT id, entity_key, status, attempt_count, last_error, next_attempt_at FROM jobs "
            f"WHERE id IN ({marks}) ORDER BY id",
            job_ids,
        )
        return tuple(
            JobStateChanged(
                job_id,
                entity_id,
                # Still leased: the lease was lost meanwhile and another worker holds it now.
                state := job_state(status, attempts, error),
                error if state in (RETRYING, JobStatus.DEAD) else None,
                next_at if state == RETRYING else None,
            )
            for job_id, entity_id, status, attempts, error, next_at in rows
        )


class DeliveryPipeline(EnginePart):
    """Sends the queue. The engine owns it; `flush` runs on the engine's loop."""

    def __init__(
        self,
        context: EngineContext,
        client: ServerClient,
        status: SyncStatus,
        *,
        sleep: Sleep,
        worker_id: str,
    ) -> None:
        super().__init__(context)
        self.client = client
        self.status = status
        self.sleep = sleep
        self.worker_id = worker_id
        config = self.config()
        self.bucket = TokenBucket(config.request_rate, config.request_burst, self.clock.monotonic)
        self.stopping = False
        #: The system is suspending (`SyncEngine.prepare_for_sleep`): no new batch starts.
        self.asleep = False
        self._in_flight: list[list[ClaimedJob]] = []

    async def flush(self, tally: SyncReport | None = None) -> FlushReport:
        """Send what is ready until a batch comes back partial (nothing more was ready), the
        link fails, or the server refuses the token; count what was sent, failed or held
        for a person in ``tally``."""
        flush = FlushReport()
        if self.status.busy_for() > 0:
            return flush  # a saturated server asked to wait (the engine sleeps until then)
        progress: list[PhaseProgress] = []
        try:
            await self._flush(flush, tally or SyncReport(), progress)
        finally:
            if progress:
                progress[0].finish()
        return flush

    async def _flush(
        self, flush: FlushReport, tally: SyncReport, progress: list[PhaseProgress]
    ) -> None:
        config = self.config()
        pipeline = max(config.delivery_pipeline, 1)
        running: set[asyncio.Future[None]] = set()
        on_the_wire = 0
        failed = False
        claimed = 0
        size = config.batch_size
        largest = config.largest_batch

        def launch() -> None:
            nonlocal on_the_wire
            on_the_wire += 1
            batch = self._batch(
                flush, tally, progress, on_claimed, on_sent, size=size, overlap=pipeline > 1
            )
            running.add(asyncio.ensure_future(batch))

        def on_claimed(count: int, rest: int) -> None:
            nonlocal claimed
            claimed += count
            if count and not progress:
                progress.append(self.status.progress("flush", claimed + rest))

        def on_sent(full: bool) -> None:
            # A partial (or empty) batch means no more jobs were ready when it was claimed.
            nonlocal on_the_wire, size
            on_the_wire -= 1
            stop = failed or self.stopping or self.asleep or self.status.auth_paused
            stop = stop or flush.unreachable
            if full:  # more was waiting: fewer, larger requests for the rest
                size = min(size * 2, largest)
            while full and not stop and on_the_wire < pipeline:
                launch()

        launch()  # one batch first: an idle queue costs one claim, not one per slot
        error: BaseException | None = None
        while running:
            finished, _ = await asyncio.wait(set(running), return_when=asyncio.FIRST_COMPLETED)
            running.difference_update(finished)
            for batch in finished:
                if batch.exception() is not None:
                    failed = True
                    error = error or batch.exception()
        if error is not None:
            raise error

    async def _batch(
        self,
        flush: FlushReport,
        tally: SyncReport,
        progress: list[PhaseProgress],
        on_claimed: Callable[[int, int], None],
        on_sent: Callable[[bool], None],
        *,
        size: int,
        overlap: bool,
    ) -> None:
        """One batch of up to ``size`` jobs. With ``overlap``, the next batch is claimed and
        sent as soon as this one's reply is in, before it is recorded; without, only after."""
        jobs, mutations, rest = await self.executor.run(
            _claim, self.store, self.worker_id, size, not progress
        )
        on_claimed(len(jobs), rest)
        if not jobs:
            on_sent(False)
            return
        self._in_flight.append(jobs)
        self.events.publish(
            JobStatesChanged(
                tuple(JobStateChanged(j.id, j.entity_key, JobStatus.LEASED) for j in jobs)
            )
        )
        await self._rate_limit()
        started = self.clock.monotonic()
        replies = await self._send(jobs, mutations)
        duration_ms = (self.clock.monotonic() - started) * 1000.0
        for reply in replies:
            if isinstance(reply, Reply) and saturated(reply.status, reply.error):
                self.status.server_busy(reply.retry_after)
        network_failed = all(isinstance(r, TransientError) for r in replies)
        flush.unreachable = network_failed
        refused = any(isinstance(r, Reply) and r.status == 401 for r in replies)
        full = len(jobs) >= size and not (network_failed or refused)
        if overlap:
            on_sent(full)
            await asyncio.sleep(0)  # let the next batch queue its claim before this record
        results = list(zip(jobs, mutations, replies, strict=True))
        report, states = await self.executor.run(_apply, self.store, results, duration_ms)
        self._in_flight.remove(jobs)
        self._tell(report, states, network_failed)
        flush.handled += len(jobs)
        tally.sent += report.done
        tally.failed += report.dead
        tally.conflicts += len(report.conflicts)
        if progress:
            progress[0].update(progress[0].done + len(jobs))
        await self.status.publish_queue()
        if not overlap:
            on_sent(full)

    async def _send(
        self, jobs: list[ClaimedJob], mutations: list[dict[str, Any]]
    ) -> list[Reply | TransientError]:
        try:
            if len(jobs) == 1:
                job = jobs[0]
                reply = await self.client.send_mutation(
                    job.idempotency_key, mutations[0], job.correlation_id
                )
                return [reply]
            items = [
                BatchItem(job.idempotency_key, mutation, job.correlation_id)
                for job, mutation in zip(jobs, mutations, strict=True)
            ]
            whole, per_item = await self.client.send_batch(items, str(uuid.uuid4()))
            return list(per_item) if per_item else [whole] * len(jobs)
        except TransientError as exc:
            return [exc] * len(jobs)

    def _tell(
        self,
        report: DeliveryReport,
        states: tuple[JobStateChanged, ...],
        network_failed: bool,
    ) -> None:
        status = self.status
        if network_failed:
            reason = report.transient_errors[0] if report.transient_errors else "network error"
            status.network_failure(reason)
        else:
            status.server_answered(mutations_ok=report.dead == 0 or report.done > 0)
            if report.done:
                status.synced()
            status.metrics.delivered(report.latencies_s)
            self.status.metrics_dirty = True
        if states:
            self.events.publish(JobStatesChanged(states))
        if report.auth_failed:
            status.pause_for_auth("the server refused this device's token: sign in again")
        for job_id, entity_id, kind in report.conflicts:
            self.events.publish(ConflictRaised(entity_id, job_id, kind))
        if report.entity_ids:
            self.events.publish(RecordsChanged(frozenset(report.entity_ids)))

    async def _rate_limit(self) -> None:
        while (delay := self.bucket.delay()) > 0:
            await self.sleep(delay)

    async def release_in_flight(self) -> None:
        """Give back the leases of batches that never got their reply recorded (stop)."""
        if self._in_flight:
            jobs = [job for batch in self._in_flight for job in batch]
            self._in_flight = []
            try:
                await self.executor.run(self.store.queue.release, jobs)
            except StorageConditionError as exc:
                # Disk full at stop: the leases run out and the next start takes them back.
                log.warning("could not release leases: %s", exc)
                return
            self.events.publish(
                JobStatesChanged(
                    tuple(JobStateChanged(j.id, j.entity_key, JobStatus.PENDING) for j in jobs)
                )
            )
