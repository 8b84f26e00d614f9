"""Sleep and wake on a private system bus, python-dbusmock's logind and NetworkManager
standing in for the OS, with the real sync engine and the real server on loopback.

A flush in progress holds a logind delay inhibitor, released at idle; PrepareForSleep(true)
stops new requests and lets go; PrepareForSleep(false) makes the device probe the server
within 2 s; NetworkManager going to full connectivity wakes an engine asleep in a long probe
backoff."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from dbus_fast import Variant

from app.desktop.network import NetworkWatch, os_hint
from app.desktop.sleep import SleepGuard
from app.executor import StoreExecutor
from app.states import Connectivity
from app.store.backoff import BackoffPolicy
from app.store.store import Store
from app.sync.connectivity import ConnectivityConfig
from app.sync.engine import SyncConfig, SyncEngine
from server.embedded import EmbeddedServer, start_server
from tests.support.dbus import Mock, PrivateBus, dbus_marks, eventually

pytestmark = dbus_marks()

#: A probe backoff no test waits out: whatever probes within it was woken.
LONG_PROBES = ConnectivityConfig(probe_backoff=BackoffPolicy(initial=120.0, cap=120.0, jitter=0))


class Watched(httpx.AsyncBaseTransport):
    """The real network, each request counted by path; mutations held `hold_s` (a flush
    long enough to see)."""

    def __init__(self, hold_s: float = 0.0) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.hold_s = hold_s
        self.paths: list[str] = []
        #: No network: every request fails to connect, as with the radio off.
        self.down = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        if self.down:
            raise httpx.ConnectError("network is unreachable", request=request)
        if self.hold_s and request.url.path.startswith("/v1/mutations"):
            await asyncio.sleep(self.hold_s)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedServer]:
    with start_server(f"sqlite:///{tmp_path / 'server.sqlite3'}", rate_limit_per_second=0) as s:
        yield s


class Device:
    def __init__(self, tmp_path: Path, server: EmbeddedServer, transport: Watched, **config: Any):
        self.store = Store(tmp_path / "device", synchronous="NORMAL")
        self.executor = StoreExecutor()
        token = server.add_device("phone-1")
        self.engine = SyncEngine(
            self.store,
            SyncConfig(server_url=server.base_url, reconnect_jitter_s=0, **config),
            token=lambda: token,
            transport=transport,
            executor=self.executor,
        )
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(self.engine.run())

    async def stop(self) -> None:
        await self.engine.stop()
        if self.task is not None:
            await asyncio.gather(self.task, return_exceptions=True)
        self.store.close()
        self.executor.shutdown()


@pytest.fixture
async def running(tmp_path: Path, server: EmbeddedServer) -> AsyncIterator[Any]:
    made: list[Device] = []

    def make(transport: Watched, **config: Any) -> Device:
        device = Device(tmp_path / str(len(made)), server, transport, **config)
        made.append(device)
        return device

    yield make
    for device in made:
        await device.stop()


async def owned(coro: Any) -> asyncio.Task[Any]:
    task = asyncio.create_task(coro)
    await asyncio.sleep(0.1)  # connected and matching signals
    return task


async def ended(task: asyncio.Task[Any]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def inhibitors(logind: Mock) -> list[Any]:
    return list(await logind.ask("ListInhibitors"))


async def guarding(device: Any) -> tuple[SleepGuard, asyncio.Task[Any]]:
    """A SleepGuard following the device's engine, and its running task (for `ended`)."""
    guard = SleepGuard(device.engine)
    guard.subscribe(device.engine.events)
    return guard, await owned(guard.run())


def queue_meters(device: Any, count: int) -> None:
    for n in range(count):
        device.store.record_edit("create", None, {"title": f"Meter {n}"})


async def until_held(logind: Mock) -> None:
    """Until logind lists one inhibitor (the guard took it for a flush)."""

    async def held() -> bool:
        return len(await inhibitors(logind)) == 1

    await eventually(held, 10)


async def test_a_flush_holds_a_delay_inhibitor_released_at_idle(
    dbus: PrivateBus, running: Any
) -> None:
    logind = dbus.mock("logind")
    transport = Watched(hold_s=1.0)
    device = running(transport, batch_size=5)
    queue_meters(device, 10)
    guard, task = await guarding(device)
    try:
        await device.start()
        await until_held(logind)
        ((what, who, why, mode, _, _),) = await inhibitors(logind)
        assert (what, who, mode) == ("sleep", "Fieldsync", "delay")
        assert why == "Sending changes to the server"
        assert device.store.stats()["queue_depth"]["done"] < 10  # still sending

        async def released() -> bool:
            return await inhibitors(logind) == [] and not guard.holding

        await eventually(released, 20)
        assert device.store.stats()["queue_depth"]["done"] == 10  # released at idle
    finally:
        await ended(task)


async def test_prepare_for_sleep_lets_go_and_waking_probes_within_two_seconds(
    dbus: PrivateBus, running: Any
) -> None:
    logind = dbus.mock("logind")
    transport = Watched(hold_s=0.5)
    device = running(transport, batch_size=1, connectivity=LONG_PROBES)
    queue_meters(device, 20)
    guard, task = await guarding(device)
    try:
        await device.start()
        await until_held(logind)
        await logind.emit("PrepareForSleep", "b", [Variant("b", True)])

        async def let_go() -> bool:
            return await inhibitors(logind) == []

        await eventually(let_go, 3)  # at once, not after the flush
        await asyncio.sleep(1.0)  # the request in flight ends; no new one starts
        sent = len([p for p in transport.paths if p.startswith("/v1/mutations")])
        await asyncio.sleep(1.5)
        assert len([p for p in transport.paths if p.startswith("/v1/mutations")]) == sent
        assert device.store.stats()["queue_depth"]["done"] < 20

        # Awake: the device asks the server at once (not after a 120 s probe backoff).
        before = len(transport.paths)
        woke = time.monotonic()
        await logind.emit("PrepareForSleep", "b", [Variant("b", False)])

        async def probed() -> bool:
            return "/healthz" in transport.paths[before:]

        await eventually(probed, 2.0)
        assert time.monotonic() - woke < 2.0

        async def drained() -> bool:
            return device.store.stats()["queue_depth"]["done"] == 20

        await eventually(drained, 30)
    finally:
        await ended(task)


async def test_full_connectivity_wakes_an_engine_asleep_in_its_probe_backoff(
    dbus: PrivateBus, running: Any
) -> None:
    nm = dbus.mock("networkmanager")
    await nm.mock_method("SetGlobalConnectionState", "u", [20])  # disconnected
    await nm.mock_method("SetConnectivity", "u", [1])  # none
    transport = Watched()
    transport.down = True
    device = running(transport, connectivity=LONG_PROBES)
    watch = NetworkWatch(device.engine)
    task = await owned(watch.run())
    try:
        await device.start()

        async def offline() -> bool:
            return device.engine.connectivity_state is Connectivity.OFFLINE

        await eventually(offline, 5)

        async def probed_once() -> bool:  # and failed: no network
            return "/healthz" in transport.paths

        await eventually(probed_once, 5)
        asleep = len(transport.paths)
        await asyncio.sleep(1.0)
        before = len(transport.paths)
        assert before == asleep, transport.paths  # asleep in the probe's 120 s backoff
        transport.down = False
        await nm.mock_method("SetConnectivity", "u", [4])  # full
        await nm.mock_method("SetGlobalConnectionState", "u", [70])  # connected, global
        woke = time.monotonic()

        async def online() -> bool:
            return device.engine.connectivity_state is Connectivity.ONLINE

        await eventually(online, 5)
        assert time.monotonic() - woke < 5
        assert transport.paths[before:]  # it asked the server again, at once
    finally:
        await ended(task)


async def test_without_logind_or_networkmanager_nothing_breaks(
    dbus: PrivateBus, running: Any
) -> None:
    device = running(Watched())
    guard, watch = SleepGuard(device.engine), NetworkWatch(device.engine)
    guard.subscribe(device.engine.events)
    async with asyncio.timeout(10):
        await guard.run()  # no logind on this bus: returns, having done nothing
        await watch.run()
    device.store.record_edit("create", None, {"title": "Still sent"})
    await device.start()

    async def sent() -> bool:
        return device.store.stats()["queue_depth"]["done"] == 1

    await eventually(sent, 10)


def test_network_managers_states_as_hints() -> None:
    assert os_hint(70, 4) is True  # connected, full
    assert os_hint(20, 4) is True  # full connectivity says more than a stale state
    assert os_hint(20, 1) is False  # disconnected
    assert os_hint(10, 0) is False  # asleep
    assert os_hint(50, 3) is True  # a local network: the server may be on it
    assert os_hint(40, 0) is None  # connecting: not known yet


async def test_a_retry_that_fell_due_during_the_sleep_runs_at_wake(
    dbus: PrivateBus, running: Any
) -> None:
    logind = dbus.mock("logind")
    transport = Watched()
    device = running(transport, connectivity=LONG_PROBES, sweep_interval_s=300.0)
    job = device.store.record_edit("create", None, {"title": "Retried after the night"})
    # Its last try failed and its backoff is an hour long: the engine sleeps until then.
    device.store.db.execute_sql(
        "UPDATE jobs SET attempt_count = 1, next_attempt_at = ? WHERE id = ?",
        (time.time() + 3600, job.job_id),
    )
    guard, task = await guarding(device)
    try:
        await device.start()
        await asyncio.sleep(1.0)
        assert device.store.stats()["queue_depth"]["done"] == 0
        await logind.emit("PrepareForSleep", "b", [Variant("b", True)])
        # The night passes: on the wall clock the retry is due (monotonic time did not move).
        device.store.db.execute_sql(
            "UPDATE jobs SET next_attempt_at = ? WHERE id = ?", (time.time() - 60, job.job_id)
        )
        woke = time.monotonic()
        await logind.emit("PrepareForSleep", "b", [Variant("b", False)])

        async def delivered() -> bool:
            return device.store.stats()["queue_depth"]["done"] == 1

        await eventually(delivered, 5)
        assert time.monotonic() - woke < 2.0  # at wake, not one backoff (or sweep) later
    finally:
        await ended(task)
