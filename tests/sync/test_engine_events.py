"""What the engine publishes, in order, against the real server on loopback: connectivity,
the last sync, flush and pull progress, and job states batched per delivery."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from app.events import (
    Connectivity,
    ConnectivityChanged,
    Event,
    JobStatesChanged,
    LastSyncChanged,
    SyncProgress,
)
from app.operations import Operations
from app.states import JobStatus
from app.store.lock import WorkerLock
from app.store.store import Store
from app.sync.connectivity import ConnectivityConfig
from app.sync.engine import SyncEngine, SyncProblem
from server.embedded import EmbeddedServer
from tests.support.api import ServerApi
from tests.sync.fake_clock import EPOCH, FakeClock
from tests.sync.sync_support import (
    Fault,
    FaultTransport,
    closed_port_url,
    fast_config,
    job_rows,
    make_engine,
    running,
    sync_until_idle,
    wait_until,
)


class Recorder:
    """Every event, with the engine's (fake) clock reading when it was published."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.events: list[tuple[float, Event]] = []

    def __call__(self, event: Event) -> None:
        self.events.append((self.clock.monotonic(), event))

    def of(self, kind: type) -> list[tuple[float, Event]]:
        return [(at, event) for at, event in self.events if isinstance(event, kind)]

    def states(self) -> list[str]:
        return [e.state for _, e in self.of(ConnectivityChanged)]  # type: ignore[attr-defined]

    def progress(self, phase: str) -> list[tuple[float, SyncProgress]]:
        return [(at, e) for at, e in self.of(SyncProgress) if e.phase == phase]  # type: ignore[attr-defined,misc]


def slow_wire(clock: FakeClock, transport: FaultTransport, seconds: float) -> None:
    """Each request to the server takes ``seconds`` of the engine's time."""

    async def takes_time(request: httpx.Request) -> None:
        clock.now += seconds

    transport.on_request = takes_time


async def test_a_long_flush_says_n_of_m_at_most_every_250_ms_and_at_the_end(
    clocked_store: Store, clock: FakeClock, server: EmbeddedServer, token_a: str
) -> None:
    store = clocked_store
    store.import_records({"title": f"WO {n}"} for n in range(2000))
    transport = FaultTransport()
    slow_wire(clock, transport, 0.1)  # 40 batches of 50, 0.1 s each: a 4 s flush
    # Batches that do not grow: the flush stays 40 requests long.
    engine = make_engine(
        store, server.base_url, token_a, transport=transport, clock=clock, batch_max_size=50
    )
    seen = Recorder(clock)
    engine.events.subscribe(seen)
    async with running(engine) as runner:
        await wait_until(engine, runner, lambda: bool(seen.progress("pull")), within_s=60.0)

    flush = seen.progress("flush")
    assert {event.total for _, event in flush} == {2000}, "m is the jobs of this flush"
    done = [event.done for _, event in flush]
    assert done[0] == 0
    assert done[-1] == 2000
    assert done == sorted(set(done)), f"done only grows: {done}"
    assert len(flush) >= 10, "a 4 s flush shows its progress, not only its end"
    gaps = [later - earlier for (earlier, _), (later, _) in zip(flush, flush[1:], strict=False)]
    assert all(gap >= 0.25 for gap in gaps[:-1]), gaps  # the last one comes at the end anyway
    assert {j["status"] for j in job_rows(store)} == {"done"}
    # Delivered and then the pull ran: each of them was a sync.
    last_syncs = [event.at for _, event in seen.of(LastSyncChanged)]  # type: ignore[attr-defined]
    assert last_syncs == sorted(last_syncs)
    assert last_syncs[-1] == engine.last_sync_at
    assert engine.last_sync_at is not None
    assert engine.last_sync_at > EPOCH


async def test_each_delivery_publishes_its_job_states_as_one_event(
    clocked_store: Store, clock: FakeClock, server: EmbeddedServer, token_a: str
) -> None:
    store = clocked_store
    ids = [store.record_edit("create", None, {"title": f"WO {n}"}).job_id for n in range(3)]
    transport = FaultTransport()
    transport.plan(Fault("status", status=503), Fault("status", status=422))
    engine = make_engine(
        store, server.base_url, token_a, transport=transport, batch_size=1, clock=clock
    )
    batches: list[JobStatesChanged] = []
    engine.events.subscribe(lambda e: batches.append(e) if isinstance(e, JobStatesChanged) else 0)
    async with running(engine) as runner:
        await wait_until(
            engine, runner, lambda: [j["status"] for j in job_rows(store)].count("done") == 2
        )
    assert all(len(batch.changes) == 1 for batch in batches)  # batch_size=1: one job each
    told: dict[int, list[str]] = {job_id: [] for job_id in ids}
    for batch in batches:
        told[batch.changes[0].job_id].append(str(batch.changes[0].status))
    # The first is refused as busy and retried after its backoff, the second for good.
    assert told == {
        ids[0]: ["leased", "retrying", "leased", "done"],
        ids[1]: ["leased", "dead"],
        ids[2]: ["leased", "done"],
    }
    [retrying] = [b.changes[0] for b in batches if b.changes[0].status == "retrying"]
    assert retrying.error
    assert retrying.next_attempt_at is not None
    assert retrying.next_attempt_at > EPOCH
    [dead] = [b.changes[0] for b in batches if b.changes[0].status == JobStatus.DEAD]
    assert dead.error
    assert dead.next_attempt_at is None


async def test_batches_grow_while_more_waits_and_a_small_queue_stays_one_batch(
    store: Store, server: EmbeddedServer, token_a: str
) -> None:
    store.import_records({"title": f"WO {n}"} for n in range(1000))
    engine = make_engine(store, server.base_url, token_a, batch_size=50, batch_max_size=200)
    sizes: list[int] = []

    def on_event(event: object) -> None:
        if isinstance(event, JobStatesChanged) and event.changes[0].status == "leased":
            sizes.append(len(event.changes))

    engine.events.subscribe(on_event)
    assert await engine.run_until_idle(30.0)
    assert sum(sizes) == 1000
    assert sizes[0] == 50, "the first batch is batch_size: one edit is not kept waiting"
    assert max(sizes) == 200, sizes
    assert sizes[-2] == 200, sizes
    assert sizes[:-1] == sorted(sizes[:-1]), f"each full batch doubles the next: {sizes}"
    assert len(sizes) < 1000 // 50 // 2
    store.record_edit("create", None, {"title": "one more"})
    sizes.clear()
    engine = make_engine(store, server.base_url, token_a, batch_size=50, batch_max_size=200)
    engine.events.subscribe(on_event)
    assert await engine.run_until_idle(30.0)
    assert sizes == [1]


async def test_a_batch_of_many_jobs_is_one_event_each_way(
    store: Store, server: EmbeddedServer, token_a: str
) -> None:
    store.import_records({"title": f"WO {n}"} for n in range(120))
    engine = make_engine(store, server.base_url, token_a, batch_size=50, batch_max_size=50)
    batches: list[JobStatesChanged] = []
    engine.events.subscribe(lambda e: batches.append(e) if isinstance(e, JobStatesChanged) else 0)
    assert await engine.run_until_idle(30.0)
    sizes = sorted(
        (len(b.changes), {str(c.status) for c in b.changes} == {"leased"}) for b in batches
    )
    assert sizes == [(20, False), (20, True), (50, False), (50, False), (50, True), (50, True)]
    done = [c.job_id for b in batches for c in b.changes if c.status == JobStatus.DONE]
    assert sorted(done) == [j["id"] for j in job_rows(store)]


async def test_connecting_turns_online_at_the_first_answer_of_a_pull(
    clocked_store: Store, clock: FakeClock, server: EmbeddedServer, token_a: str
) -> None:
    # Before: with nothing queued the start-up pull answered 200 and the status bar said
    # "Checking the connection…" for as long as the app ran.
    engine = make_engine(clocked_store, server.base_url, token_a, clock=clock)
    seen = Recorder(clock)
    engine.events.subscribe(seen)
    async with running(engine) as runner:
        await wait_until(engine, runner, lambda: bool(seen.of(LastSyncChanged)))
        await clock.run_for(3600.0)  # an hour of idle: a pull every 5 min, all answered
    assert seen.states() == [Connectivity.CONNECTING, Connectivity.ONLINE]
    assert engine.connectivity_state == Connectivity.ONLINE
    [(pulled_at, pulled)] = seen.of(LastSyncChanged)[:1]
    assert pulled.at == EPOCH + pulled_at  # type: ignore[attr-defined]
    pulls = seen.progress("pull")
    assert {(e.done, e.total) for _, e in pulls} == {(0, 0)}  # nothing new on the server
    assert 12 <= len(pulls) <= 14, len(pulls)
    assert len(seen.of(LastSyncChanged)) == len(pulls)  # each pull is a sync


async def test_connecting_turns_unreachable_at_the_first_failure(
    clocked_store: Store, clock: FakeClock
) -> None:
    engine = make_engine(clocked_store, closed_port_url(), "t", clock=clock)
    seen = Recorder(clock)
    engine.events.subscribe(seen)
    async with running(engine) as runner:
        await wait_until(engine, runner, lambda: len(seen.states()) >= 2)
        failures_before = engine.connectivity.reason
    assert seen.states()[:2] == [Connectivity.CONNECTING, Connectivity.UNREACHABLE]
    assert failures_before  # the reason says what failed
    assert seen.of(LastSyncChanged) == []


async def test_a_pull_counts_the_changes_it_received_and_sets_the_last_sync(
    clocked_store: Store,
    clock: FakeClock,
    server: EmbeddedServer,
    token_a: str,
    admin_api: ServerApi,
) -> None:
    for n in range(250):
        admin_api.create(title=f"office {n}")
    transport = FaultTransport()
    slow_wire(clock, transport, 0.3)  # each page of 100 takes 0.3 s
    engine = make_engine(clocked_store, server.base_url, token_a, transport=transport, clock=clock)
    seen = Recorder(clock)
    engine.events.subscribe(seen)
    async with running(engine) as runner:
        await wait_until(engine, runner, lambda: bool(seen.progress("idle")))
    received = [e.done for _, e in seen.progress("pull")]
    assert received == [0, 100, 200, 250]
    assert {e.total for _, e in seen.progress("pull")} == {0}  # unknown until the feed ends
    [(_, synced)] = seen.of(LastSyncChanged)
    assert synced.at == engine.last_sync_at  # type: ignore[attr-defined]
    # The end of the pull is told after its last count.
    assert [e for _, e in seen.of(SyncProgress)][-2:] == [
        SyncProgress(250, 0, "pull"),
        SyncProgress(0, 0, "idle"),
    ]


async def test_the_last_sync_is_told_at_start_from_the_previous_run(
    store: Store, server: EmbeddedServer, token_a: str
) -> None:
    first = await sync_until_idle(store, server.base_url, token_a)
    assert first.last_sync_at is not None
    clock = FakeClock()
    again = make_engine(store, closed_port_url(), token_a, clock=clock)
    told: list[float] = []
    again.events.subscribe(lambda e: told.append(e.at) if isinstance(e, LastSyncChanged) else 0)
    async with running(again):
        await clock.asleep()
    assert told == [first.last_sync_at]


async def test_signed_out_then_connecting_again_after_a_sign_in(
    clocked_store: Store, clock: FakeClock, server: EmbeddedServer, token_a: str
) -> None:
    token = ["fst_revoked-or-mistyped"]
    config = fast_config(server.base_url)
    engine = SyncEngine(  # the token is read on every request, as from the keyring
        clocked_store, config, token=lambda: token[0], clock=clock, sleep=clock.sleep
    )
    seen = Recorder(clock)
    engine.events.subscribe(seen)
    async with running(engine) as runner:
        await wait_until(engine, runner, lambda: engine.auth_paused)
        token[0] = token_a  # the person signed in again
        engine.resume_after_sign_in()
        await wait_until(engine, runner, lambda: seen.states()[-1] == Connectivity.ONLINE)
    assert seen.states() == [
        Connectivity.CONNECTING,
        Connectivity.SIGNED_OUT,
        Connectivity.CONNECTING,  # the new token is not proven until the server answers
        Connectivity.ONLINE,
    ]


async def test_an_engine_standing_by_for_another_worker_says_sync_is_stopped(
    clocked_store: Store, clock: FakeClock, server: EmbeddedServer, token_a: str
) -> None:
    other_worker = WorkerLock(clocked_store.data_dir)
    other_worker.acquire()
    engine = make_engine(clocked_store, server.base_url, token_a, clock=clock)
    seen = Recorder(clock)
    engine.events.subscribe(seen)
    async with running(engine) as runner:
        await clock.asleep()  # retrying the lock every lock_retry_s
        assert engine.connectivity_state == Connectivity.STOPPED
        standing_by = (await engine.sync_now()).problem
        other_worker.release()
        await wait_until(engine, runner, lambda: engine.connectivity_state == Connectivity.ONLINE)
    assert standing_by == SyncProblem.STOPPED
    assert seen.states() == [
        Connectivity.CONNECTING,
        Connectivity.STOPPED,
        Connectivity.CONNECTING,
        Connectivity.ONLINE,
    ]
    [stopped] = [e for _, e in seen.of(ConnectivityChanged) if e.state == "stopped"]  # type: ignore[attr-defined]
    assert "worker" in stopped.reason  # type: ignore[attr-defined]


async def test_a_server_that_went_away_shows_unreachable_within_seconds_not_at_the_retry(
    clocked_store: Store, clock: FakeClock, server: EmbeddedServer, token_a: str
) -> None:
    # Before: an edit failed to send, its retry was 22 s away, and the status bar said
    # "Online" until the third failure in a row, minutes later.
    store = clocked_store
    transport = FaultTransport()
    engine = make_engine(
        store,
        server.base_url,
        token_a,
        transport=transport,
        clock=clock,
        connectivity=ConnectivityConfig(),  # the real probe delays: about 1 s at first
    )
    seen = Recorder(clock)
    engine.events.subscribe(seen)
    sends_when_told: list[int] = []

    def on_event(event: Event) -> None:
        if isinstance(event, ConnectivityChanged) and event.state == Connectivity.UNREACHABLE:
            sends_when_told.append(sum(p.startswith("/v1/mutations") for p in transport.paths()))

    engine.events.subscribe(on_event)
    async with running(engine) as runner:
        await wait_until(engine, runner, lambda: engine.connectivity_state == Connectivity.ONLINE)
        # The server goes away: every request from now on fails to connect.
        transport.plan(*[Fault("drop", path_prefix="/") for _ in range(50)])
        store.record_edit("create", None, {"title": "Meter reading"})
        engine.wake()
        await wait_until(
            engine, runner, lambda: engine.connectivity_state == Connectivity.UNREACHABLE
        )
    [failed_at] = [
        at
        for at, e in seen.of(JobStatesChanged)
        if e.changes[0].status == "retrying"  # type: ignore[attr-defined]
    ]
    [unreachable_at] = [
        at
        for at, e in seen.of(ConnectivityChanged)
        if e.state == Connectivity.UNREACHABLE  # type: ignore[attr-defined]
    ]
    assert sends_when_told == [1], "told after the first failed send, not the third"
    assert unreachable_at - failed_at <= 2.5, "told within two probe delays (~1 s each)"
    assert "/healthz" in transport.paths()


async def test_one_lost_reply_is_checked_with_a_probe_and_does_not_flip_online(
    clocked_store: Store, clock: FakeClock, server: EmbeddedServer, token_a: str
) -> None:
    store = clocked_store
    transport = FaultTransport()
    engine = make_engine(store, server.base_url, token_a, transport=transport, clock=clock)
    seen = Recorder(clock)
    engine.events.subscribe(seen)
    async with running(engine) as runner:
        await wait_until(engine, runner, lambda: engine.connectivity_state == Connectivity.ONLINE)
        transport.plan(Fault("lose"))
        store.record_edit("create", None, {"title": "Meter reading"})
        engine.wake()
        await wait_until(engine, runner, lambda: [j["status"] for j in job_rows(store)] == ["done"])
    assert seen.states() == [Connectivity.CONNECTING, Connectivity.ONLINE]
    assert "/healthz" in transport.paths(), "the lost reply was checked, not trusted"


async def asleep_until_a_sweep(clock: FakeClock) -> None:
    """Return once the engine sleeps a long sleep (its next sweep), the short ones passed."""
    for _ in range(50):
        await clock.asleep()
        if clock.sleeping()[0] - clock.now >= 100:
            return
        await clock.advance(clock.sleeping()[0] - clock.now)
    raise AssertionError("the engine never went to sleep until its sweep")


async def test_an_operation_that_queues_a_change_wakes_the_engine_by_itself(
    clocked_store: Store, clock: FakeClock, server: EmbeddedServer, token_a: str
) -> None:
    # A quiet engine sleeps until its next sweep (10 min here); only a wake sends sooner.
    store = clocked_store
    engine = make_engine(
        store,
        server.base_url,
        token_a,
        clock=clock,
        sweep_interval_s=600.0,
        pull_interval_s=600.0,
    )
    operations = Operations(store, engine.executor, engine.events)

    def done(count: int) -> Callable[[], bool]:
        return lambda: [j["status"] for j in job_rows(store)] == ["done"] * count

    async with running(engine) as runner:
        await wait_until(engine, runner, lambda: engine.connectivity_state == Connectivity.ONLINE)
        await asleep_until_a_sweep(clock)
        # Written behind the engine's back (no OpChanges): it waits for the sweep.
        quiet_at = clock.monotonic()
        store.record_edit("create", None, {"title": "Unannounced"})
        await wait_until(engine, runner, done(1))
        quiet_took = clock.monotonic() - quiet_at
        await asleep_until_a_sweep(clock)
        # Through an operation: its OpChanges wakes the engine at once, and no screen asks.
        told_at = clock.monotonic()
        await operations.save_edit("create", None, {"title": "Announced"})
        await wait_until(engine, runner, done(2))
        told_took = clock.monotonic() - told_at
    assert quiet_took >= 100, "nothing but its sweep woke the engine for the unannounced edit"
    assert told_took < 1.0, "the operation's OpChanges woke the engine"
