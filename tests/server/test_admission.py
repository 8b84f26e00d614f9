"""Admission control (server/admission/): a saturated server answers 429 with `Retry-After`,
never a 5xx, applies every edit that got in exactly once, and the device engine waits as told."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from app.store.store import Store
from app.sync.engine import SyncConfig, SyncEngine
from server.admission.limit import Admission, RetryAdvice
from server.embedded import EmbeddedServer, start_server
from tests.support.api import create_body
from tests.support.postgres import PostgresCluster

_databases = itertools.count()


@pytest.fixture
def pg_url(postgres: PostgresCluster) -> str:
    return postgres.create_server_database(f"admission_{next(_databases)}")


def saturable(db_url: str, limit: int, queue: int = 0, wait_s: float = 0.0) -> EmbeddedServer:
    """A server working on `limit` device requests at once, telling the refused 1 s."""
    return start_server(
        db_url,
        rate_limit_per_second=0,
        max_in_flight_requests=limit,
        max_queued_requests=queue,
        queue_wait_seconds=wait_s,
        busy_retry_after_max_seconds=1,
    )


class HeldBody:
    """A request body that stops after its first byte until `release()`: the request it
    belongs to has been admitted and holds its slot meanwhile."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.released = asyncio.Event()

    async def chunks(self) -> AsyncIterator[bytes]:
        yield self.body[:1]
        await self.released.wait()
        yield self.body[1:]

    def release(self) -> None:
        self.released.set()


def admission_of(server: EmbeddedServer) -> Admission:
    [admission] = [
        m.kwargs["admission"] for m in server.app.user_middleware if "admission" in m.kwargs
    ]
    assert isinstance(admission, Admission)
    return admission


async def hold_slot(
    server: EmbeddedServer, client: httpx.AsyncClient, token: str
) -> tuple[HeldBody, asyncio.Task[httpx.Response]]:
    """A create whose body waits, once it holds the server's only slot."""
    held = HeldBody(httpx.Request("POST", "/", json=create_body()).content)
    headers = {
        "Authorization": f"Bearer {token}",
        "Idempotency-Key": str(uuid.uuid4()),
        "Content-Type": "application/json",
        "Content-Length": str(len(held.body)),
    }
    sent = client.post("/v1/mutations", content=held.chunks(), headers=headers)
    task = asyncio.create_task(sent)
    deadline = time.monotonic() + 10
    while admission_of(server).running == 0:
        assert time.monotonic() < deadline, "the held request never got in"
        await asyncio.sleep(0.005)
    return held, task


async def until_refused(client: httpx.AsyncClient, token: str) -> httpx.Response:
    """The first `GET /v1/changes` the server refuses (the held request got in first)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        reply = await client.get("/v1/changes", headers={"Authorization": f"Bearer {token}"})
        if reply.status_code == 429:
            return reply
        await asyncio.sleep(0.01)
    raise AssertionError("the server never refused a request over its limit")


def test_retry_after_paces_the_returns_at_the_rate_the_process_serves() -> None:
    now = [0.0]
    advice = RetryAdvice(30, 2, lambda: now[0])
    for _ in range(5):
        advice.finished(0.2)  # two at a time, 0.2 s each: 10 a second
    now[0] = 3600.0  # an idle hour later, the storm meets the same pace
    waits = [advice.refuse(busy=20) for _ in range(40)]
    # The 20 in hand take 2 s; then the refused come back 10 a second, in turn.
    assert waits == sorted(waits)
    assert (waits[0], waits[-1]) == (2, 6)
    assert max(waits.count(second) for second in set(waits)) <= 10
    now[0] += 60.0  # the line has long been served: the next refusal starts a new one
    assert advice.refuse(busy=0) == 1
    assert RetryAdvice(1, 1, lambda: 0.0).refuse(busy=1000) == 1  # never above the most
    far = RetryAdvice(30, 1, lambda: 0.0)
    far.finished(1.0)
    assert far.refuse(busy=100) == 30  # a line longer than 30 s: come back then
    clock = [0.0]
    fast = RetryAdvice(30, 1, lambda: clock[0])
    for step in range(50):  # slow requests, but 50 finished in the last second
        clock[0] = step / 50
        fast.finished(2.0)
    assert fast.refuse(busy=100) == 2  # paced by what it finishes: 100 at 50 a second


def test_admission_hands_slots_over_in_arrival_order_and_bounds_the_queue() -> None:
    async def scenario() -> None:
        admission = Admission(1, 2, 5.0, RetryAdvice(5, 1, time.monotonic))
        assert await admission.enter() is None
        first = asyncio.create_task(admission.enter())
        second = asyncio.create_task(admission.enter())
        await asyncio.sleep(0)
        assert admission.waiting == 2
        refused = await admission.enter()  # the queue is full: refused at once
        assert refused is not None
        assert 1 <= refused <= 5
        admission.leave(time.monotonic())
        assert await first is None
        assert not second.done()
        admission.leave(time.monotonic())
        assert await second is None
        admission.leave(time.monotonic())
        assert (admission.running, admission.waiting, admission.refused) == (0, 0, 1)

        # A request that waits too long is refused and leaves no place behind.
        short = Admission(1, 1, 0.05, RetryAdvice(5, 1, time.monotonic))
        assert await short.enter() is None
        assert await short.enter() is not None
        assert short.waiting == 0
        # One whose client goes away while waiting gives up its place (or the slot it got).
        waiter = asyncio.create_task(short.enter())
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        short.leave(time.monotonic())
        assert (short.running, short.waiting) == (0, 0)

    asyncio.run(scenario())


def test_a_request_over_the_limit_is_answered_429_at_once_and_health_still_answers(
    pg_url: str,
) -> None:
    async def scenario(server: EmbeddedServer, token: str) -> None:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=10) as client:
            held, create = await hold_slot(server, client, token)
            refused = await until_refused(client, token)
            assert refused.json() == {"error": "server_busy"}
            assert refused.headers["Retry-After"] == "1"
            assert (await client.get("/healthz")).status_code == 200
            # Every refusal is counted, and an admin reads the count while the slot is held.
            office = {"Authorization": f"Bearer {server.add_device('office', 'admin')}"}
            metrics = (await client.get("/metrics", headers=office)).text
            count = admission_of(server).refused
            assert count >= 1
            assert f"\nfieldsync_admission_refusals_total {count}\n" in metrics
            assert not create.done()
            held.release()
            created = await create
            assert created.status_code == 201
            changes = await client.get("/v1/changes", headers={"Authorization": f"Bearer {token}"})
            assert changes.status_code == 200

    with saturable(pg_url, limit=1) as server:
        asyncio.run(scenario(server, server.add_device("phone")))


def test_more_concurrent_batches_than_the_limit_apply_once_and_never_5xx(pg_url: str) -> None:
    devices, edits = 20, 5

    async def device(client: httpx.AsyncClient, token: str, name: str) -> list[int]:
        body = {
            "mutations": [
                {"idempotency_key": f"{name}-{n}", **create_body(title=f"{name} {n}")}
                for n in range(edits)
            ]
        }
        statuses = []
        while True:
            reply = await client.post(
                "/v1/mutations/batch", json=body, headers={"Authorization": f"Bearer {token}"}
            )
            statuses.append(reply.status_code)
            if reply.status_code != 429:
                assert [r["status"] for r in reply.json()["results"]] == [201] * edits
                return statuses
            await asyncio.sleep(float(reply.headers["Retry-After"]))

    async def storm(server: EmbeddedServer, tokens: dict[str, str]) -> list[int]:
        limits = httpx.Limits(max_connections=devices)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30, limits=limits) as c:
            answers = await asyncio.gather(*(device(c, t, n) for n, t in tokens.items()))
        return [status for statuses in answers for status in statuses]

    with saturable(pg_url, limit=1, queue=8, wait_s=2.0) as server:
        tokens = {f"phone-{n}": server.add_device(f"phone-{n}") for n in range(devices)}
        statuses = asyncio.run(storm(server, tokens))
        assert set(statuses) == {200, 429}  # saturated, and never a 5xx
        orders = server.store.tables.WorkOrder
        rows = list(orders.select(orders.title, orders.version))
    assert sorted(row.title for row in rows) == sorted(
        f"{name} {n}" for name in tokens for n in range(edits)
    )
    assert {row.version for row in rows} == {1}


class Timeline(httpx.AsyncBaseTransport):
    """The engine's real transport, noting when each request left and each answer came."""

    def __init__(self, on_refused: asyncio.Event) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.on_refused = on_refused
        self.events: list[tuple[float, str, int, str | None]] = []  # sent/answered

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.events.append((time.monotonic(), request.url.path, 0, None))
        response = await self.inner.handle_async_request(request)
        await response.aread()
        self.events.append(
            (time.monotonic(), request.url.path, response.status_code,
             response.headers.get("retry-after"))
        )  # fmt: skip
        if response.status_code == 429:
            self.on_refused.set()
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_the_device_engine_waits_the_retry_after_the_real_server_gives(
    pg_url: str, tmp_path: Path
) -> None:
    async def scenario(server: EmbeddedServer, token: str, store: Store) -> Timeline:
        refused = asyncio.Event()
        timeline = Timeline(refused)
        config = SyncConfig(server_url=server.base_url, reconnect_jitter_s=0)
        engine = SyncEngine(store, config, token=lambda: token, transport=timeline)
        async with httpx.AsyncClient(base_url=server.base_url, timeout=10) as client:
            held, create = await hold_slot(server, client, server.add_device("holder"))
            await until_refused(client, token)
            running = asyncio.create_task(engine.run_until_idle(30))
            await refused.wait()
            held.release()  # the slot is free long before the second try
            assert (await create).status_code == 201
            assert await running
        return timeline

    store = Store(tmp_path / "device")
    store.record_edit("create", None, {"title": "Replace pump seal"})
    with saturable(pg_url, limit=1) as server:
        timeline = asyncio.run(scenario(server, server.add_device("phone"), store))
    store.close()
    answers = [event for event in timeline.events if event[2] == 429]
    assert answers, timeline.events
    for at, _, _, retry_after in answers:
        assert retry_after == "1"
        later = [event for event in timeline.events if event[0] > at and event[2] == 0]
        assert later, "the engine never asked again"
        waited = later[0][0] - at
        assert waited >= 1.0, "the engine asked again before Retry-After elapsed"
        assert waited < 2.0, "the engine waited well past the Retry-After (its backoff)"
    delivered = [e for e in timeline.events if e[1].startswith("/v1/mutations") and e[2] == 201]
    assert delivered, timeline.events
