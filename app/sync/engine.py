"""The sync engine: the delivery worker, connectivity probing and reconciliation, on asyncio.

Event-driven: the loop sleeps on one asyncio.Event and wakes on a local enqueue (`wake`),
connectivity regained (`set_os_hint`), or the earliest `next_attempt_at`; it never polls
busily, so it costs no CPU while idle or offline. After a run of network failures it stops
sending and probes ``/healthz`` with jittered backoff. Blocking store calls run on the
single-writer executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

import httpx

from app.credentials import scrub
from app.events import (
    AuthRequired,
    ConflictRaised,
    ConnectivityChanged,
    EventBus,
    JobStateChanged,
    QueueChanged,
    RecordsChanged,
    SyncProgress,
)
from app.executor import StoreExecutor
from app.metrics import EngineMetrics
from app.states import JobStatus
from app.store.backoff import backoff_delay
from app.store.errors import StorageConditionError, WorkerLockHeldError
from app.store.lock import WorkerLock
from app.store.stats import outstanding_depth
from app.store.store import Store
from app.sync.config import SyncConfig
from app.sync.conflicts import Conflicts
from app.sync.connectivity import ConnectivityDetector
from app.sync.delivery import (
    apply_replies,
    build_mutations,
)
from app.sync.errors import (
    AuthError,
    MalformedReplyError,
    ServerBusyError,
    SyncError,
    TransientError,
)
from app.sync.ratelimit import TokenBucket
from app.sync.reconcile import Reconciler, ReconcileReport
from app.sync.transport import BatchItem, Reply, ServerClient

__all__ = ["SyncConfig", "SyncEngine"]

log = logging.getLogger(__name__)

QUEUE_EVENT_INTERVAL_S = 0.25
#: The wall clock and the monotonic clock disagreeing by more than this between two sweeps
#: means the device clock was set: retry and lease times are bounded again.
CLOCK_JUMP_S = 60.0


class SyncEngine:
    """Runs until `stop()`. One engine per data dir delivers (the worker lock decides)."""

    def __init__(
        self,
        store: Store,
        config: SyncConfig,
        events: EventBus | None = None,
        *,
        token: Callable[[], str],
        transport: httpx.AsyncBaseTransport | None = None,
        executor: StoreExecutor | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.events = events or EventBus()
        self.executor = executor or StoreExecutor()
        self.rng = rng or random.Random()
        self.worker_id = f"worker-{uuid.uuid4().hex[:12]}"
        self.client = ServerClient(
            config.server_url,
            token,
            config.transport,
            transport=transport,
            on_clock_skew=self._on_clock_skew,
        )
        self.connectivity = ConnectivityDetector(config.connectivity, self.rng)
        self.conflicts = Conflicts(store)
        self.reconciler = Reconciler(
            store, self.client, self.executor, page_size=config.pull_page_size
        )
        self.bucket = TokenBucket(config.request_rate, config.request_burst, time.monotonic)
        self.lock = WorkerLock(store.data_dir)
        self.priority_ids: set[str] = set()
        self.metrics = EngineMetrics()
        self._metrics_dirty = False
        self.clock_skew_s: float | None = None
        self.auth_paused = False
        self.last_sync_at: float | None = None
        self.last_error: str | None = None
        self.delivering = False
        self._wake = asyncio.Event()
        self._stopping = False
        self._reconcile_due = True
        self._last_pull = 0.0
        # A pull the server answered "busy" (429/503) waits until then (its Retry-After, or a
        # growing backoff); deliveries go on meanwhile.
        self._pull_not_before = 0.0
        self._pulls_refused = 0
        self._idle = asyncio.Event()
        self._in_flight: list[list[Any]] = []
        self._queue_published_at = 0.0
        self._queue_dirty = False
        self._last_batch_unreachable = False
        self._revalidate_ids: set[str] = set()

    # -- control (called from the loop's thread) ---------------------------------------------

    def wake(self, *, reconcile: bool = False) -> None:
        """Something changed (a local edit, "Sync now"): look at the queue again."""
        if reconcile:
            self._reconcile_due = True
        self._wake.set()

    def revalidate(self, entity_id: str) -> None:
        """A person opened this record: it was shown from the cache at once; if it is older
        than ``stale_after_s``, ask the server for a newer version in the background."""
        self._revalidate_ids.add(entity_id)
        self.priority_ids.add(entity_id)
        self._wake.set()

    def set_os_hint(self, online: bool | None, metered: bool = False) -> None:
        before = self.connectivity.state
        if self.connectivity.os_hint(online, metered):
            self._reconcile_due = True
            self._wake.set()
        self._publish_connectivity(before)

    def set_sync_on_metered(self, enabled: bool) -> None:
        """The person's setting changed: it applies from the next send."""
        self.config = dataclasses.replace(self.config, sync_on_metered=enabled)
        self._wake.set()

    def resume_after_sign_in(self) -> None:
        self.auth_paused = False
        self._reconcile_due = True
        self._wake.set()

    def health(self) -> dict[str, Any]:
        return {
            "store": "ok",
            "server": self.connectivity.state,
            "server_reason": self.connectivity.reason,
            "mutations": "paused (sign in)"
            if self.auth_paused
            else ("failing" if self.connectivity.state == "degraded" else "ok"),
            "delivering": self.delivering,
            "clock_skew_s": self.clock_skew_s,
            "last_sync_at": self.last_sync_at,
            "last_error": self.last_error,
        }

    async def stop(self, grace_s: float = 5.0) -> None:
        """Finish or release in-flight leases within ``grace_s`` seconds."""
        self._stopping = True
        self._wake.set()
        task = getattr(self, "_task", None)
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), grace_s)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    # -- main loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        self._task = asyncio.current_task()
        try:
            await self._acquire_lock()
            self.delivering = True
            await self.executor.run(self._startup_sweep)
            async with asyncio.TaskGroup() as group:
                group.create_task(self._loop())
        finally:
            await self._release_in_flight()
            self.delivering = False
            self.lock.release()
            await self.client.aclose()

    async def run_until_idle(self, limit_s: float | None) -> bool:
        """Deliver and reconcile until no job can move without a person (True: nothing leased,
        nothing pending except behind a conflict or a dead job) or time runs out (False)."""
        runner = asyncio.create_task(self.run())
        try:
            async with asyncio.timeout(limit_s):
                while True:
                    self._idle.clear()
                    await self._idle.wait()
                    if self.auth_paused:
                        return False
                    moving = await self.executor.run(self.store.queue.in_flight)
                    if moving == 0 and not self._reconcile_due:
                        return True
                    if runner.done():
                        runner.result()
                        return False
        except TimeoutError:
            return False
        finally:
            await self.stop()
            if not runner.done():
                runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, WorkerLockHeldError):
                await runner

    async def _acquire_lock(self) -> None:
        while not self._stopping:
            try:
                await self.executor.run(self.lock.acquire)
                return
            except WorkerLockHeldError as exc:
                self.last_error = str(exc)
                log.info("standing by: %s", exc)
                await self._sleep(self.config.lock_retry_s)
        raise asyncio.CancelledError

    def _startup_sweep(self) -> None:
        self.store.queue.expire_orphaned_leases()
        self.store.queue.reclaim_expired()
        self.store.queue.clamp_times()

    def _periodic_sweep(self, clock_moved: bool) -> None:
        self.store.queue.reclaim_expired()
        if clock_moved:
            # Set back a day during a backoff, a job would wait a day: bound it again.
            self.store.queue.clamp_times()

    async def _loop(self) -> None:
        last_sweep = time.monotonic()
        last_wall = self.store.clock()
        while not self._stopping:
            if time.monotonic() - last_sweep >= self.config.sweep_interval_s:
                elapsed = time.monotonic() - last_sweep
                wall = self.store.clock()
                clock_moved = abs((wall - last_wall) - elapsed) > CLOCK_JUMP_S
                try:
                    await self.executor.run(self._periodic_sweep, clock_moved)
                except StorageConditionError as exc:
                    await self._store_unavailable(exc)
                    continue
                last_sweep, last_wall = time.monotonic(), wall
            if self.auth_paused:
                self._idle.set()
                await self._sleep(None)
                continue
            if not self._may_use_network():
                await self._probe()
                continue
            try:
                handled = await self._deliver()
                if handled:
                    if self._last_batch_unreachable:
                        # Do not burn an attempt of every queued job within milliseconds
                        # while the link is down: pause as the probe would.
                        await self._sleep(self.connectivity.next_probe_delay())
                    continue
                if self._queue_dirty:
                    # The flush just ended: show "all sent" now, not after the pull.
                    await self._publish_queue(force=True)
                pull_due = self._reconcile_due or time.monotonic() - self._last_pull > (
                    self.config.pull_interval_s
                )
                if pull_due and time.monotonic() >= self._pull_not_before:
                    await self._answered(self._reconcile())
                    continue
                if self._revalidate_ids and time.monotonic() >= self._pull_not_before:
                    await self._answered(self._revalidate_read())
                    continue
            except AuthError as exc:
                self._pause_for_auth(str(exc))
                continue
            except TransientError as exc:
                self.last_error = str(exc)
                self._network_failure(str(exc))
                await self._sleep(1.0)
                continue
            except StorageConditionError as exc:
                await self._store_unavailable(exc)
                continue
            if self._metrics_dirty:
                try:
                    await self.executor.run(self.metrics.save, self.store)
                except StorageConditionError as exc:
                    await self._store_unavailable(exc)
                    continue
                self._metrics_dirty = False
            if self._queue_dirty:
                await self._publish_queue(force=True)
            self._idle.set()
            await self._sleep(await self._until_next_due())

    async def _store_unavailable(self, exc: StorageConditionError) -> None:
        """Disk full, read-only, busy: the queue is intact; tell the person, try later."""
        self.last_error = str(exc)
        log.warning("store unavailable: %s", exc)
        self._idle.set()
        await self._sleep(self.config.sweep_interval_s)

    def _may_use_network(self) -> bool:
        if not self.connectivity.may_send:
            return False
        return not (self.connectivity.metered and not self.config.sync_on_metered)

    async def _answered(self, reading: Coroutine[Any, Any, None]) -> None:
        """Run a pull or a read. A server that answers busy (429/503) or with a reply the
        device cannot use is online: reads wait as it asked (Retry-After) or with a growing
        backoff, not counted as network failures, while deliveries go on."""
        try:
            await reading
        except (ServerBusyError, MalformedReplyError) as exc:
            self.last_error = str(exc)
            log.warning("pull deferred: %s", exc)
            self._pulls_refused += 1
            delay = backoff_delay(
                self._pulls_refused,
                self.store.queue.config.backoff,
                self.rng,
                retry_after=exc.retry_after,
            )
            self._pull_not_before = time.monotonic() + delay
            self._reconcile_due = True

    async def _until_next_due(self) -> float:
        next_at = await self.executor.run(self.store.queue.next_attempt_at)
        wait = self.config.sweep_interval_s
        if next_at is not None:
            wait = min(wait, max(next_at - self.store.clock(), 0.05))
        now = time.monotonic()
        pull_in = self.config.pull_interval_s - (now - self._last_pull)
        if self._reconcile_due:
            pull_in = 0.0
        pull_in = max(pull_in, self._pull_not_before - now)
        return max(min(wait, pull_in), 0.05)

    async def _sleep(self, seconds: float | None) -> None:
        """Sleep until woken or the time is up. The only wait in the loop."""
        if self._stopping:
            return
        try:
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        except TimeoutError:
            pass
        self._wake.clear()

    # -- delivery ----------------------------------------------------------------------------

    async def _deliver_once(self, on_sent: Callable[[bool], None] | None = None) -> int:
        jobs = await self.executor.run(
            self.store.queue.claim, self.worker_id, self.config.batch_size
        )
        if not jobs:
            if on_sent is not None:
                on_sent(False)
            return 0
        self._in_flight.append(jobs)
        for job in jobs:
            self.events.publish(JobStateChanged(job.id, job.entity_key, JobStatus.LEASED))
        mutations = await self.executor.run(build_mutations, self.store, jobs)
        await self._rate_limit()
        started = time.monotonic()
        correlation_id = str(uuid.uuid4())
        replies: list[Reply | TransientError]
        try:
            if len(jobs) == 1:
                job = jobs[0]
                replies = [
                    await self.client.send_mutation(
                        job.idempotency_key, mutations[0], job.correlation_id
                    )
                ]
            else:
                items = [
                    BatchItem(job.idempotency_key, mutation, job.correlation_id)
                    for job, mutation in zip(jobs, mutations, strict=True)
                ]
                whole, per_item = await self.client.send_batch(items, correlation_id)
                replies = list(per_item) if per_item else [whole] * len(jobs)
        except TransientError as exc:
            replies = [exc] * len(jobs)
        duration_ms = (time.monotonic() - started) * 1000.0
        network_failed = all(isinstance(r, TransientError) for r in replies)
        self._last_batch_unreachable = network_failed
        if on_sent is not None:
            refused = any(isinstance(r, Reply) and r.status == 401 for r in replies)
            on_sent(len(jobs) >= self.config.batch_size and not (network_failed or refused))
            await asyncio.sleep(0)  # let the next batch queue its claim before this record
        results = list(zip(jobs, mutations, replies, strict=True))
        report = await self.executor.run(
            apply_replies, self.store, self.conflicts, results, duration_ms
        )
        self._in_flight.remove(jobs)
        if network_failed:
            self.last_error = report.transient_errors[0] if report.transient_errors else None
            self._network_failure(self.last_error or "network error")
        else:
            before = self.connectivity.state
            self.connectivity.server_answered(mutations_ok=report.dead == 0 or report.done > 0)
            self._publish_connectivity(before)
            if report.done:
                self.last_sync_at = time.time()
                self.metrics.last_sync_at = self.last_sync_at
            self.metrics.delivered(report.latencies_s)
            self._metrics_dirty = True
        if report.auth_failed:
            self._pause_for_auth("the server refused this device's token: sign in again")
        for job_id, entity_id, kind in report.conflicts:
            self.events.publish(ConflictRaised(entity_id, job_id, kind))
        if report.entity_ids:
            self.events.publish(RecordsChanged(frozenset(report.entity_ids)))
        await self._publish_queue()
        return len(jobs)

    async def _deliver(self) -> int:
        """Keep up to ``delivery_pipeline`` batches on the wire: as soon as one batch's reply
        arrives, the next batch is claimed and sent, and only then is the reply recorded, so
        the server works while the device does its bookkeeping. Claims never hold two jobs of
        one work order, so per-record order is kept. Every batch started here is awaited here
        (no fire-and-forget); the first error is raised once all have ended."""
        pipeline = max(self.config.delivery_pipeline, 1)
        if pipeline == 1:
            return await self._deliver_once()
        running: set[asyncio.Future[int]] = set()
        on_the_wire = 0
        failed = False

        def launch() -> None:
            nonlocal on_the_wire
            on_the_wire += 1
            running.add(asyncio.ensure_future(self._deliver_once(on_sent)))

        def on_sent(full: bool) -> None:
            # A partial (or empty) batch means no more jobs were ready when it was claimed.
            nonlocal on_the_wire
            on_the_wire -= 1
            stop = failed or self._stopping or self.auth_paused or self._last_batch_unreachable
            while full and not stop and on_the_wire < pipeline:
                launch()

        launch()  # one batch first: an idle queue costs one claim, not one per slot
        total = 0
        error: BaseException | None = None
        while running:
            finished, _ = await asyncio.wait(set(running), return_when=asyncio.FIRST_COMPLETED)
            running.difference_update(finished)
            for batch in finished:
                if batch.exception() is not None:
                    failed = True
                    error = error or batch.exception()
                else:
                    total += batch.result()
        if error is not None:
            raise error
        return total

    async def _rate_limit(self) -> None:
        while (delay := self.bucket.delay()) > 0:  # noqa: ASYNC110 - a timed wait, not a poll
            await asyncio.sleep(delay)

    async def _release_in_flight(self) -> None:
        if self._in_flight:
            jobs = [job for batch in self._in_flight for job in batch]
            self._in_flight = []
            try:
                await self.executor.run(self.store.queue.release, jobs)
            except StorageConditionError as exc:
                # Disk full at stop: the leases run out and the next start takes them back.
                log.warning("could not release leases: %s", exc)

    # -- reconcile, probe, state ------------------------------------------------------------

    async def _reconcile(self) -> None:
        await self._send_escalations()
        self.events.publish(SyncProgress(0, 0, "pull"))
        report = await self.reconciler.run(tuple(self.priority_ids))
        self._pulls_refused = 0
        self._reconcile_due = False
        self._last_pull = time.monotonic()
        self.last_sync_at = time.time()
        self.metrics.last_sync_at = self.last_sync_at
        self.metrics.reconcile_s = round(report.duration_s, 3)
        self.metrics.reconcile_changes = report.changes
        self._metrics_dirty = True
        await self.executor.run(self.store.queue.bump, "reconciles")
        if report.changed_ids:
            self.events.publish(RecordsChanged(frozenset(report.changed_ids)))
        self.events.publish(SyncProgress(report.changes, report.changes, "idle"))

    async def _revalidate_read(self) -> None:
        ids, self._revalidate_ids = self._revalidate_ids, set()
        report = ReconcileReport()
        try:
            await self.reconciler.revalidate(ids, report, stale_after_s=self.config.stale_after_s)
        except SyncError:
            self._revalidate_ids |= ids  # read again later, not forgotten
            raise
        if report.changed_ids:
            self.events.publish(RecordsChanged(frozenset(report.changed_ids)))

    async def _send_escalations(self) -> None:
        for item in await self.executor.run(self.conflicts.pending_escalations):
            reply = await self.client.raise_conflict(item["review_key"], item["body"])
            conflict = (reply.body or {}).get("conflict")
            if reply.status in (200, 201) and isinstance(conflict, dict) and "id" in conflict:
                await self.executor.run(
                    self.conflicts.mark_escalated, item["job_id"], str(conflict["id"])
                )
            elif reply.status == 401:
                raise AuthError("the server refused this device's token", status=401)
            elif 400 <= reply.status < 500 and reply.status not in (408, 409, 429):
                # Refused for good (too large, invalid): the person decides again, told why.
                why = (reply.body or {}).get("detail") or (reply.body or {}).get("error")
                problem = scrub(f"{why} ({reply.status})")[:500]
                await self.executor.run(self.conflicts.escalation_refused, item["job_id"], problem)
                self.last_error = (
                    f"the server refused to send conflict {item['job_id']} for review: {problem}"
                )
                log.warning("%s", self.last_error)

    async def _probe(self) -> None:
        delay = self.connectivity.next_probe_delay()
        self._idle.set()
        await self._sleep(delay)
        if self._stopping:
            return
        before = self.connectivity.state
        try:
            if await self.client.healthz():
                self.connectivity.server_answered()
                self._reconcile_due = True
                if self.config.reconnect_jitter_s > 0:
                    await asyncio.sleep(self.rng.uniform(0, self.config.reconnect_jitter_s))
            else:
                self.connectivity.probe_failed("the server's health check failed")
        except SyncError as exc:
            self.connectivity.probe_failed(str(exc))
        self._publish_connectivity(before)

    def _network_failure(self, reason: str) -> None:
        before = self.connectivity.state
        self.connectivity.network_failure(reason)
        self._publish_connectivity(before)

    def _pause_for_auth(self, reason: str) -> None:
        if self.auth_paused:
            return  # another batch in flight met the same 401
        self.auth_paused = True
        self.last_error = reason
        self.events.publish(AuthRequired(self.config.server_url, reason))

    def _publish_connectivity(self, before: str) -> None:
        if self.connectivity.state != before:
            state = self.connectivity.state
            self.events.publish(ConnectivityChanged(state, self.connectivity.reason))

    async def _publish_queue(self, *, force: bool = False) -> None:
        """Queue depth for the status bar, at most every ``QUEUE_EVENT_INTERVAL_S`` while
        draining (counting outstanding jobs per batch would make a drain quadratic); the loop
        forces a last one when it goes idle."""
        now = time.monotonic()
        if not force and now - self._queue_published_at < QUEUE_EVENT_INTERVAL_S:
            self._queue_dirty = True
            return
        self._queue_dirty = False
        self._queue_published_at = now
        depth = await self.executor.run(outstanding_depth, self.store)
        oldest = depth.pop("oldest_pending_age_s")
        self.events.publish(QueueChanged(depth, oldest))

    def _on_clock_skew(self, skew: float) -> None:
        changed = self.clock_skew_s is None or abs(skew - self.clock_skew_s) > 1
        if changed and abs(skew) > self.config.clock_skew_warn_s:
            log.warning("device clock differs from the server's by %.0f s", skew)
        self.clock_skew_s = skew
        self.metrics.clock_skew_s = skew

    def watch(self, entity_ids: Iterable[str]) -> None:
        """Records open in the UI or assigned here: revalidated first on reconcile."""
        self.priority_ids = set(entity_ids)
