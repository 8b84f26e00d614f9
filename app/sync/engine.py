"""The sync engine's loop: what to do next, and when, on asyncio.

Event-driven: the loop sleeps on one asyncio.Event and wakes on a local enqueue (an
operation's `OpChanges` on the bus, or `wake`), connectivity regained (`set_os_hint`), "Sync
now" (`sync_now`), or the earliest `next_attempt_at`; it never polls busily, so it costs no
CPU while idle or offline. Each turn does the next thing due: flush the queue
(`app.sync.pipeline`), send escalations (`app.sync.outbox`) and pull (`app.sync.reconcile`),
or read records opened in the UI, or start an upload's chunk beside it (`app.sync.upload_lane`).
After a run of network failures it stops sending and probes ``/healthz`` with jittered backoff.
What it does is published through `app.sync.status`. Time comes from an injected clock and
sleep (`app.sync.clock`); blocking store calls run on the single-writer executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from app.events import Connectivity, Event, EventBus, OpChanges
from app.executor import StoreExecutor
from app.metrics import EngineMetrics
from app.store.errors import StorageConditionError, WorkerLockHeldError
from app.store.lock import WorkerLock
from app.store.settings import install_id
from app.store.store import Store
from app.sync.clock import Clock, Sleep, sleep_or_wake
from app.sync.config import SyncConfig
from app.sync.conflicts import Conflicts
from app.sync.connectivity import ConnectivityDetector
from app.sync.context import EngineContext
from app.sync.errors import AuthError, SyncError, TransientError
from app.sync.outbox import EscalationOutbox
from app.sync.pipeline import DeliveryPipeline
from app.sync.puller import Puller
from app.sync.reconcile import Reconciler
from app.sync.status import SyncStatus
from app.sync.sweeps import Sweeps
from app.sync.sync_now import SyncProblem, SyncReport, SyncRequests, sync_pass
from app.sync.transport import ServerClient
from app.sync.upload_lane import UploadLane

__all__ = ["SyncConfig", "SyncEngine", "SyncProblem", "SyncReport"]

log = logging.getLogger(__name__)


class SyncEngine:
    """Runs until `stop()`. One engine per data dir delivers (the worker lock decides).

    ``clock`` (``time()`` and ``monotonic()``) and ``sleep`` default to the `time` module and
    `asyncio.sleep`; queue times (retries, leases) follow the store's own clock.
    """

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
        clock: Clock | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.events = events or EventBus()
        self.executor = executor or StoreExecutor()
        self.rng = rng or random.Random()
        self.clock: Clock = clock or time
        self.sleep: Sleep = sleep or asyncio.sleep
        self.worker_id = f"worker-{uuid.uuid4().hex[:12]}"
        self.client = ServerClient(
            config.server_url,
            token,
            config.transport,
            transport=transport,
            on_clock_skew=self._on_clock_skew,
        )
        self.connectivity = ConnectivityDetector(config.connectivity, self.rng)
        self.metrics = EngineMetrics()
        context = EngineContext(store, lambda: self.config, self.executor, self.events, self.clock)
        self.status = SyncStatus(
            context, self.connectivity, server_url=config.server_url, metrics=self.metrics
        )
        self.pipeline = DeliveryPipeline(
            context, self.client, self.status, sleep=self.sleep, worker_id=self.worker_id
        )
        self.conflicts = Conflicts(store)
        self.uploads = UploadLane(context, self.client, self.status, self.worker_id, self.wake)
        self.uploader = self.uploads.uploader
        self.sweeps = Sweeps(store, self.uploader, self.clock, lambda: self.config.sweep_interval_s)
        self.outbox = EscalationOutbox(self.conflicts, self.client, self.executor)
        self.reconciler = Reconciler(
            store, self.client, self.executor, page_size=config.pull_page_size
        )
        self.puller = Puller(context, self.reconciler, self.outbox, self.status, rng=self.rng)
        self.lock = WorkerLock(store.data_dir)
        self.clock_skew_s: float | None = None
        self.delivering = False
        self._task: asyncio.Task[Any] | None = None
        self._wake = asyncio.Event()
        self._stopping = False
        self._idle = asyncio.Event()
        self._requests = SyncRequests()
        self._probe_now = False  # resumed: probe without the backoff's delay

    # -- what the engine tells ---------------------------------------------------------------

    @property
    def auth_paused(self) -> bool:
        return self.status.auth_paused

    @property
    def last_error(self) -> str | None:
        return self.status.last_error

    @property
    def last_sync_at(self) -> float | None:
        return self.status.last_sync_at

    @property
    def connectivity_state(self) -> Connectivity:
        return self.status.state

    def health(self) -> dict[str, Any]:
        return self.status.health(delivering=self.delivering, clock_skew_s=self.clock_skew_s)

    # -- control (called from the loop's thread) ---------------------------------------------

    def wake(self, *, reconcile: bool = False) -> None:
        """Something changed (a local edit, a setting): look at the queue again."""
        if reconcile:
            self.puller.due = True
        self._wake.set()

    async def sync_now(self) -> SyncReport:
        """A person asked to sync: flush, then pull, then revalidate what is open, even with
        nothing queued, at once (a probe backoff is cut short). Returns what got through, or
        why not. The engine must be running (`run`)."""
        if self._task is None:
            await asyncio.sleep(0)  # a run() just created starts on this turn of the loop
        if self._task is None or self._task.done() or self._stopping:
            why = self.last_error or "the sync engine is not running"
            return SyncReport(problem=SyncProblem.STOPPED, detail=why)
        self.connectivity.retry_now()
        self._wake.set()
        return await self._requests.ask()

    def revalidate(self, entity_id: str) -> None:
        """A person opened this record: it was shown from the cache at once; if it is older
        than ``stale_after_s``, ask the server for a newer version in the background."""
        self.puller.open(entity_id)
        self._wake.set()

    def watch(self, entity_ids: Iterable[str]) -> None:
        """Records open in the UI or assigned here: revalidated first on reconcile."""
        self.puller.watch(entity_ids)

    def set_os_hint(self, online: bool | None, metered: bool = False) -> None:
        if self.connectivity.os_hint(online, metered):
            self.puller.due = True
        self.status.publish_connectivity()
        self._wake.set()  # online, offline or metered: the loop decides again

    def set_sync_on_metered(self, enabled: bool) -> None:
        """The person's setting changed: it applies from the next send."""
        self.config = dataclasses.replace(self.config, sync_on_metered=enabled)
        self._wake.set()

    def prepare_for_sleep(self) -> None:
        """The system is about to suspend (logind's PrepareForSleep): no new request starts;
        one in flight ends as it would (`app.desktop.sleep` lets the suspend wait for it)."""
        self.pipeline.asleep = True
        self._wake.set()

    def resumed(self) -> None:
        """Back from suspend: ask the server at once (the network may differ), then sync.
        Retries and leases fell due on the wall clock meanwhile: the loop sees them now."""
        self.pipeline.asleep = False
        self._probe_now = True
        self.connectivity.resumed()
        self.puller.due = True
        self._wake.set()

    def resume_after_sign_in(self) -> None:
        self.status.resume_after_sign_in()
        self.puller.due = True
        self._wake.set()

    async def stop(self, grace_s: float = 5.0) -> None:
        """Finish or release in-flight leases within ``grace_s`` seconds."""
        self._stopping = True
        self.pipeline.stopping = True
        self._wake.set()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), grace_s)
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise  # this stop() itself was cancelled
                # A run standing by for the lock ends so: a stop, not an error.
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    # -- main loop ---------------------------------------------------------------------------

    def on_event(self, event: Event) -> None:
        """An operation changed the queue (a save, a retry, a photo attached): send it now,
        whoever made it; the screens never wake the engine themselves."""
        if isinstance(event, OpChanges) and (event.queue or event.attachments):
            self.wake()

    async def run(self) -> None:
        self._task = asyncio.current_task()
        unsubscribe = self.events.subscribe(self.on_event)
        try:
            self.status.publish_connectivity()
            await self._acquire_lock()
            self.delivering = True
            await self.executor.run(self._startup_sweep)
            self.status.publish_last_sync()
            async with self.uploads.settling(), asyncio.TaskGroup() as group:
                group.create_task(self._loop())
        finally:
            unsubscribe()
            self.delivering = False
            self._requests.finish_all(SyncProblem.STOPPED, "sync stopped")
            await self.pipeline.release_in_flight()  # the upload's: `UploadLane.settling`
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
                    if moving == 0 and not self.puller.due:
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
                if self.status.standing_by is not None:
                    self.status.stand_by(None)
                return
            except WorkerLockHeldError as exc:
                self.status.last_error = str(exc)
                log.info("standing by: %s", exc)
                self.status.stand_by(str(exc))
                self._requests.finish_all(SyncProblem.STOPPED, str(exc))
                await self._sleep(self.config.lock_retry_s)
        raise asyncio.CancelledError

    def _startup_sweep(self) -> None:
        self.client.install = install_id(self.store)
        self.sweeps.at_start()
        self.status.load_last_sync()

    async def _loop(self) -> None:
        while not self._stopping:
            if self.sweeps.due():
                try:
                    await self.executor.run(self.sweeps.periodic)
                except StorageConditionError as exc:
                    await self._store_unavailable(exc)
                    continue
            self.status.publish_connectivity()
            held = self._held()
            if held is not None:
                self._requests.finish_all(held, self.status.reason)
                self._go_idle()
                await self._sleep(None)
                continue
            if not self.connectivity.may_send:
                await self._probe()
                if not self.connectivity.may_send:
                    offline = self.connectivity.os_online is False
                    problem = SyncProblem.OFFLINE if offline else SyncProblem.UNREACHABLE
                    self._requests.finish_all(problem, self.connectivity.reason)
                continue
            try:
                if self._requests.waiting:
                    await sync_pass(self._requests, self.pipeline, self.puller, self.status)
                    continue
                if await self._step():
                    continue
            except AuthError as exc:
                self.status.pause_for_auth(str(exc))
                continue
            except TransientError as exc:
                self.status.network_failure(str(exc))
                self._requests.finish(SyncProblem.UNREACHABLE, str(exc))
                await self._sleep(1.0)
                continue
            except StorageConditionError as exc:
                await self._store_unavailable(exc)
                continue
            if self.status.metrics_dirty:
                try:
                    await self.executor.run(self.metrics.save, self.store)
                except StorageConditionError as exc:
                    await self._store_unavailable(exc)
                    continue
                self.status.metrics_dirty = False
            if self.status.queue_dirty:
                await self.status.publish_queue(force=True)
            if not self.uploads.running:  # a chunk on the wire wakes the loop when it ends
                self._go_idle()
            await self._sleep(await self._until_next_due())

    async def _store_unavailable(self, exc: StorageConditionError) -> None:
        """Disk full, read-only, busy: the queue is intact; tell the person, try later."""
        self.status.last_error = str(exc)
        log.warning("store unavailable: %s", exc)
        self._requests.finish(SyncProblem.STORAGE, str(exc))
        self._go_idle()
        await self._sleep(self.config.sweep_interval_s)

    def _held(self) -> SyncProblem | None:
        """Nothing may be sent until a person acts: signed out, or paused on a metered link."""
        if self.pipeline.asleep:
            return SyncProblem.ASLEEP
        if self.status.auth_paused:
            return SyncProblem.SIGNED_OUT
        if self.status.paused:
            return SyncProblem.PAUSED
        return None

    async def _step(self) -> bool:
        """Do the next thing due (False: nothing is, or only the upload step on the wire)."""
        self.uploads.collect()
        flush = await self.pipeline.flush()
        if flush.handled:
            self.uploads.edits_sent()
            if flush.unreachable:
                # Do not burn an attempt of every queued job within milliseconds while the
                # link is down: pause as the probe would.
                await self._sleep(self.connectivity.next_probe_delay())
            return True
        if self.status.queue_dirty:
            # The flush just ended: show "all sent" now, not after the pull.
            await self.status.publish_queue(force=True)
        if self.puller.waiting_for_server():
            return False
        await self.uploads.start()  # beside the loop, and the pull beside it; its end wakes us
        if self.puller.pull_due():
            await self.puller.pull()
            return True
        if self.puller.opened_ids:
            await self.puller.read_opened()
            return True
        return False

    async def _until_next_due(self) -> float:
        next_at = await self.executor.run(self.store.queue.next_attempt_at)
        wait = self.config.sweep_interval_s
        if next_at is not None:
            wait = min(wait, max(next_at - self.store.clock(), 0.05))
        # A saturated server's Retry-After holds everything: sleep it out, do not spin.
        return max(min(wait, self.puller.next_in()), self.status.busy_for(), 0.05)

    async def _sleep(self, seconds: float | None) -> None:
        """Sleep until woken or the time is up. The only wait in the loop."""
        if self._stopping:
            return
        await sleep_or_wake(self.sleep, seconds, self._wake)
        self._wake.clear()
        self.uploads.look_again()

    def _go_idle(self) -> None:
        self.status.idle()
        self._idle.set()

    async def _probe(self) -> None:
        """Offline or unreachable: wait the probe backoff (cut short by "Sync now" or a
        regained network), then ask ``/healthz``."""
        asked = self._requests.waiting or self._probe_now
        self._probe_now = False
        delay = 0.0 if asked else self.connectivity.next_probe_delay()
        self._go_idle()
        await self._sleep(delay)
        if self._stopping:
            return
        try:
            answered = await self.client.healthz()
        except SyncError as exc:
            self.status.probe_failed(str(exc))
            return
        if not answered:
            self.status.probe_failed("the server's health check failed")
            return
        self.status.server_answered()
        self.puller.due = True
        if self.config.reconnect_jitter_s > 0 and not (asked or self._requests.waiting):
            # Many devices reconnecting at once do not all arrive together.
            await self.sleep(self.rng.uniform(0, self.config.reconnect_jitter_s))

    def _on_clock_skew(self, skew: float) -> None:
        changed = self.clock_skew_s is None or abs(skew - self.clock_skew_s) > 1
        if changed and abs(skew) > self.config.clock_skew_warn_s:
            log.warning("device clock differs from the server's by %.0f s", skew)
        self.clock_skew_s = skew
        self.metrics.clock_skew_s = skew
