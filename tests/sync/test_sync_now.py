"""Sync now against the real server on loopback: flush, then pull, then revalidate, even
with nothing queued, and a report of what happened or why not."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from app.events import Connectivity, ConnectivityChanged
from app.store.store import Store
from app.sync.engine import SyncEngine, SyncProblem, SyncReport
from server.embedded import EmbeddedServer
from tests.support.api import ServerApi
from tests.sync.fake_clock import FakeClock
from tests.sync.sync_support import (
    Fault,
    FaultTransport,
    closed_port_url,
    job_rows,
    make_engine,
    running,
)


@dataclass
class Device:
    """A device against the real server: its store and engine on a fake clock, and the
    requests it made."""

    store: Store
    clock: FakeClock
    engine: SyncEngine
    transport: FaultTransport


@pytest.fixture
def device(clocked_store: Store, clock: FakeClock, server: EmbeddedServer, token_a: str) -> Device:
    transport = FaultTransport()
    engine = make_engine(clocked_store, server.base_url, token_a, transport=transport, clock=clock)
    return Device(clocked_store, clock, engine, transport)


async def test_sync_now_with_nothing_queued_brings_what_the_office_added(
    device: Device, admin_api: ServerApi
) -> None:
    # Before: "Sync now" only woke the engine; with nothing queued no request was made and
    # the office's new work order never appeared.
    store, clock, engine, transport = device.store, device.clock, device.engine, device.transport
    async with running(engine):
        await clock.asleep()  # started, pulled (nothing yet), idle for the next 5 min
        added = [admin_api.create(title=f"From the office {n}")["id"] for n in range(12)]
        asked_at, requests_before = clock.now, len(transport.requests)
        report = await engine.sync_now()
        assert clock.now == asked_at, "at once, not at the next scheduled pull"
    assert report == SyncReport(sent=0, received=12)
    assert all(store.cache.get(entity_id) is not None for entity_id in added)
    assert "/v1/changes" in transport.paths()[requests_before:]


async def test_sync_now_sends_then_receives_and_counts_both(
    device: Device, admin_api: ServerApi
) -> None:
    store, clock, engine, transport = device.store, device.clock, device.engine, device.transport
    async with running(engine):
        await clock.asleep()
        for n in range(3):
            store.record_edit("create", None, {"title": f"Mine {n}"})
        for n in range(12):
            admin_api.create(title=f"Theirs {n}")
        start = len(transport.requests)
        report = await engine.sync_now()
    assert report == SyncReport(sent=3, received=12)
    assert {j["status"] for j in job_rows(store)} == {"done"}
    sent = transport.paths()[start:]
    # Flush first, then pull: the changes feed comes after the last mutation.
    last_mutation = max(i for i, p in enumerate(sent) if p.startswith("/v1/mutations"))
    assert "/v1/changes" in sent[last_mutation:], sent


async def test_sync_now_reads_a_stale_opened_record_after_the_pull(
    clocked_store: Store,
    clock: FakeClock,
    server: EmbeddedServer,
    token_a: str,
    admin_api: ServerApi,
) -> None:
    entity_id = admin_api.create(title="Pump")["id"]
    transport = FaultTransport()
    engine = make_engine(
        clocked_store, server.base_url, token_a, transport=transport, clock=clock, stale_after_s=0
    )
    async with running(engine):
        first = await engine.sync_now()
        await clock.asleep()  # idle again, so the read below waits for "Sync now"
        engine.revalidate(entity_id)
        report = await engine.sync_now()
    assert first == SyncReport(sent=0, received=1)
    assert report == SyncReport(sent=0, received=0)  # the server still has version 1
    assert transport.paths()[-2:] == ["/v1/changes", f"/v1/records/{entity_id}"]


async def test_sync_now_says_unreachable_when_the_server_does_not_answer(
    clocked_store: Store, clock: FakeClock
) -> None:
    store = clocked_store
    store.record_edit("create", None, {"title": "Waits on the device"})
    engine = make_engine(store, closed_port_url(), "t", clock=clock)
    async with running(engine):
        await clock.asleep()
        report = await engine.sync_now()
    assert report.problem == SyncProblem.UNREACHABLE
    assert (report.sent, report.received) == (0, 0)
    assert report.detail  # what failed, for the details view
    assert [j["status"] for j in job_rows(store)] == ["pending"]


async def test_sync_now_says_offline_when_the_system_has_no_network(
    clocked_store: Store, clock: FakeClock
) -> None:
    engine = make_engine(clocked_store, closed_port_url(), "t", clock=clock)
    async with running(engine):
        engine.set_os_hint(False)
        await clock.asleep()
        report = await engine.sync_now()
    assert report.problem == SyncProblem.OFFLINE
    assert engine.connectivity_state == Connectivity.OFFLINE


async def test_sync_now_says_signed_out_when_the_token_is_refused(
    clocked_store: Store, clock: FakeClock, server: EmbeddedServer
) -> None:
    engine = make_engine(clocked_store, server.base_url, "fst_not-a-device-token", clock=clock)
    async with running(engine):
        report = await engine.sync_now()
    assert report.problem == SyncProblem.SIGNED_OUT
    assert engine.connectivity_state == Connectivity.SIGNED_OUT


async def test_sync_now_respects_a_metered_pause_until_the_setting_allows_it(
    device: Device,
) -> None:
    store, engine = device.store, device.engine
    store.record_edit("create", None, {"title": "Waits for wifi"})
    engine.set_sync_on_metered(False)
    states: list[str] = []
    engine.events.subscribe(
        lambda e: states.append(e.state) if isinstance(e, ConnectivityChanged) else 0
    )
    engine.set_os_hint(True, metered=True)
    async with running(engine):
        paused = await engine.sync_now()
        assert [j["status"] for j in job_rows(store)] == ["pending"]
        engine.set_sync_on_metered(True)
        allowed = await engine.sync_now()
    assert paused.problem == SyncProblem.PAUSED
    assert allowed == SyncReport(sent=1, received=0)
    assert states[:2] == [Connectivity.PAUSED, Connectivity.CONNECTING]
    assert states[-1] == Connectivity.ONLINE


async def test_sync_now_cuts_the_probe_backoff_short(device: Device) -> None:
    store, clock, engine, transport = device.store, device.clock, device.engine, device.transport
    store.record_edit("create", None, {"title": "Sent when the link is back"})
    # The link drops the first five requests: three failures stop sending, then probes fail.
    transport.plan(*[Fault("drop", path_prefix="/") for _ in range(5)])
    async with running(engine):
        while len(transport.requests) < 5:
            await clock.asleep()
            await clock.advance(clock.sleeping()[0] - clock.now)
        await clock.asleep()
        assert engine.connectivity_state == Connectivity.UNREACHABLE
        waiting_until = clock.sleeping()[0]
        asked_at = clock.now
        report = await engine.sync_now()
        assert clock.now == asked_at < waiting_until, "the probe did not wait its backoff"
    assert report == SyncReport(sent=1, received=0)
    assert engine.connectivity_state == Connectivity.ONLINE


async def test_two_people_asking_at_once_get_one_pass(
    store: Store, server: EmbeddedServer, token_a: str
) -> None:
    store.record_edit("create", None, {"title": "WO"})
    transport = FaultTransport()
    engine = make_engine(store, server.base_url, token_a, transport=transport)
    async with running(engine):
        first, second = await asyncio.gather(engine.sync_now(), engine.sync_now())
    assert first == second == SyncReport(sent=1, received=0)
    assert transport.paths().count("/v1/mutations") == 1


async def test_sync_now_without_a_running_engine_says_so(
    store: Store, server: EmbeddedServer, token_a: str
) -> None:
    engine = make_engine(store, server.base_url, token_a)
    try:
        report = await engine.sync_now()
    finally:
        engine.executor.shutdown()
    assert report.problem == SyncProblem.STOPPED
