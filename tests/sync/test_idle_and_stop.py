"""No busy polling (offline, idle, or waiting behind a conflict) and a bounded graceful stop."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
import pytest

from app.events import Connectivity, JobStatesChanged
from app.store.cache import apply_server_record
from app.store.db import connection
from app.store.lock import WorkerLock
from app.store.store import Store
from app.sync.engine import SyncConfig, SyncEngine
from tests.sync.fake_clock import FakeClock
from tests.sync.fake_server import FakeServer, json_response, record
from tests.sync.sync_support import (
    FaultTransport,
    closed_port_url,
    job_rows,
    make_engine,
    run_engine_until,
    running,
    wait_until,
)

URL = "http://sync.test"


async def run_for(engine: SyncEngine, clock: FakeClock, seconds: float) -> None:
    """Run the engine for ``seconds`` of its (fake) time, jumping from timer to timer."""
    runner = asyncio.create_task(engine.run())
    await clock.run_for(seconds)
    started = time.monotonic()
    await engine.stop(2.0)
    await runner
    assert time.monotonic() - started < 1.0  # an idle engine stops at once
    engine.executor.submit(engine.store.db.close)
    engine.executor.shutdown()


async def test_offline_engine_sleeps_between_probes(clocked_store: Store, clock: FakeClock) -> None:
    store = clocked_store
    for n in range(5):
        store.record_edit("create", None, {"title": f"WO {n}"})
    transport = FaultTransport()
    # Production connectivity settings: probes back off from 1 s, doubling, with jitter.
    config = SyncConfig(server_url=closed_port_url(), reconnect_jitter_s=0.0)
    engine = SyncEngine(
        store, config, token=lambda: "t", transport=transport, clock=clock, sleep=clock.sleep
    )
    cpu_before = time.process_time()
    async with running(engine):
        await clock.run_for(3.0)
        cpu_used = time.process_time() - cpu_before
        # Before going offline: at most a few tries 1 s apart; then probes at ~1, ~2, ~4 s.
        assert 2 <= len(transport.requests) <= 8, transport.paths()
        # A server that does not answer while the network is up is "unreachable" (issue
        # 12); "offline" is the operating system's word for no network at all.
        assert engine.connectivity_state == Connectivity.UNREACHABLE
        assert cpu_used < 0.5, f"{cpu_used:.2f} s of CPU in 3 s offline"
        assert {j["status"] for j in job_rows(store)} == {"pending"}
        tried = len(transport.requests)
        await clock.run_for(600.0)  # ten minutes more: the probe waits grow to the cap
        probes = transport.paths()[tried:]
    assert set(probes) == {"/healthz"}, "no job is sent while the server is unreachable"
    # 1, 2, 4 ... 120 s with jitter: about ten probes in ten minutes, not one per loop turn.
    assert 4 <= len(probes) <= 16, probes
    assert max(clock.slept) <= 120.0
    assert {j["status"] for j in job_rows(store)} == {"pending"}


async def test_idle_engine_makes_no_requests_and_no_claims(
    clocked_store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = clocked_store
    store.record_edit("create", None, {"title": "WO"})
    fake = FakeServer()
    claims = count_calls(monkeypatch, store.queue, "claim")
    engine = make_engine(store, URL, "t", transport=fake.transport, clock=clock)
    cpu_before = time.process_time()
    await run_for(engine, clock, 2.0)
    cpu_used = time.process_time() - cpu_before
    assert {j["status"] for j in job_rows(store)} == {"done"}
    assert len(fake.requests) <= 3  # the mutation and one pull
    assert claims[0] <= 4
    assert cpu_used < 0.5


async def test_edit_waiting_behind_a_conflict_is_not_polled(
    clocked_store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = clocked_store
    entity = str(uuid.uuid4())
    with store.db.atomic():
        apply_server_record(connection(store.db), record(entity, 1, title="Pump"), store.clock())
    store.record_edit("update", entity, {"title": "Mine"})
    store.record_edit("update", entity, {"notes": "later edit, waits behind the conflict"})
    fake = FakeServer()
    current = record(entity, 2, title="Theirs")
    fake.script.append(json_response(409, {"error": "version_conflict", "current": current}))
    claims = count_calls(monkeypatch, store.queue, "claim")
    engine = make_engine(store, URL, "t", transport=fake.transport, clock=clock)
    await run_for(engine, clock, 2.0)
    assert [j["status"] for j in job_rows(store)] == ["conflict", "pending"]
    assert len(fake.mutation_requests) == 1
    assert claims[0] <= 6, f"{claims[0]} claims in 2 s: the engine polls the blocked edit"


def count_calls(monkeypatch: pytest.MonkeyPatch, target: Any, name: str) -> list[int]:
    calls = [0]
    original = getattr(target, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, counting)
    return calls


async def test_wake_delivers_a_new_edit_at_once(clocked_store: Store, clock: FakeClock) -> None:
    store = clocked_store
    fake = FakeServer()
    engine = make_engine(store, URL, "t", transport=fake.transport, clock=clock)
    async with running(engine) as runner:
        await clock.asleep()  # idle: the loop sleeps up to sweep_interval_s (30 s)
        asleep_at = clock.now
        store.record_edit("create", None, {"title": "WO"})
        engine.wake()
        await wait_until(engine, runner, lambda: bool(fake.mutation_requests), within_s=2.0)
        assert clock.now == asleep_at, "wake() did not deliver: a timer had to fire first"


async def test_graceful_stop_releases_leases_within_the_bound(store: Store) -> None:
    for n in range(3):
        store.record_edit("create", None, {"title": f"WO {n}"})
    hang = asyncio.Event()
    sent = asyncio.Event()

    async def never_answers(request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith("/v1/mutations"):
            sent.set()
            await hang.wait()
        return json_response(200, {"changes": [], "next": "0", "has_more": False})

    engine = make_engine(store, URL, "t", transport=httpx.MockTransport(never_answers))
    told: list[list[tuple[int, str]]] = []
    engine.events.subscribe(
        lambda e: (
            told.append([(c.job_id, str(c.status)) for c in e.changes])
            if isinstance(e, JobStatesChanged)
            else None
        )
    )
    runner = asyncio.create_task(engine.run())
    try:
        await asyncio.wait_for(sent.wait(), 5.0)
        assert {j["status"] for j in job_rows(store)} == {"leased"}
        started = time.monotonic()
        await engine.stop(grace_s=0.5)
        elapsed = time.monotonic() - started
        assert runner.done()
    finally:
        hang.set()
        if not runner.done():
            runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner
    assert elapsed < 1.5, f"stop took {elapsed:.2f} s with a 0.5 s grace"
    jobs = job_rows(store)
    assert {j["status"] for j in jobs} == {"pending"}
    assert all(j["locked_by"] is None for j in jobs)
    assert all(j["attempt_count"] == 0 for j in jobs)  # a released claim is not an attempt
    ids = [j["id"] for j in jobs]
    # Told as sent, then as waiting again: no badge keeps saying "Sending…" after a stop.
    assert told == [[(i, "leased") for i in ids], [(i, "pending") for i in ids]]
    with WorkerLock(store.data_dir):  # the worker lock is free again
        pass
    engine.executor.submit(store.db.close)
    engine.executor.shutdown()


async def test_stop_waits_for_an_answer_inside_the_grace(store: Store) -> None:
    store.record_edit("create", None, {"title": "WO"})
    fake = FakeServer()
    slow_start = asyncio.Event()
    answer = asyncio.Event()

    async def slow(request: httpx.Request) -> httpx.Response:
        slow_start.set()
        await answer.wait()  # the server takes its time; the test says when it answers
        return fake.apply(request)

    fake.script.append(lambda request: slow(request))  # type: ignore[arg-type,return-value]
    engine = make_engine(store, URL, "t", transport=httpx.MockTransport(_async_handler(fake)))
    runner = asyncio.create_task(engine.run())
    await asyncio.wait_for(slow_start.wait(), 5.0)
    stopping = asyncio.create_task(engine.stop(grace_s=3.0))
    await asyncio.sleep(0)
    assert not stopping.done(), "stop did not wait for the answer on its way"
    answer.set()
    await stopping
    await runner
    engine.executor.submit(store.db.close)
    engine.executor.shutdown()
    assert [j["status"] for j in job_rows(store)] == ["done"]  # finished, not abandoned


def _async_handler(fake: FakeServer) -> Any:
    async def handle(request: httpx.Request) -> httpx.Response:
        fake.requests.append(request)
        path = request.url.path
        if path.startswith("/v1/mutations") and fake.script:
            answer = fake.script.pop(0)
            return await answer(request)  # type: ignore[operator,misc,no-any-return]
        return fake._answer(request)

    return handle


async def test_run_engine_until_helper_stops_cleanly(store: Store) -> None:
    fake = FakeServer()
    store.record_edit("create", None, {"title": "WO"})
    engine = make_engine(store, URL, "t", transport=fake.transport)
    await run_engine_until(engine, lambda: job_rows(store)[0]["status"] == "done")
    assert not engine.delivering
