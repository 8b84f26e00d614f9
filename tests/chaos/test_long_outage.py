"""A week offline, with the device clock stepped forward and back, in virtual time.

The real store and sync engine run on a loop whose clock jumps instead of sleeping
(`virtual_time.py`); the server is an in-process fake behind `httpx.MockTransport` that first
answers 503 (so jobs carry backoff state), then refuses every connection for seven days, then
comes back. Every network attempt is counted per hour of outage.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from app.store.queue import QueueConfig
from app.store.store import Store
from app.sync.engine import SyncConfig, SyncEngine
from tests.chaos.helpers import record_figures
from tests.chaos.virtual_time import InlineExecutor, VirtualClock, virtual_loop

HOUR = 3600.0
DAY = 24 * HOUR
BUSY_UNTIL = 120.0  # the server answers 503 to mutations until then
OUTAGE = (BUSY_UNTIL, BUSY_UNTIL + 7 * DAY)


class FakeServer:
    """Just enough of the contract: healthz, single and batch mutations, an empty feed."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.records: dict[str, dict[str, Any]] = {}
        self.applied: Counter[str] = Counter()
        self.attempts: list[tuple[float, str]] = []

    def _apply(self, item: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        entity = item["entity_id"]
        current = self.records.get(entity)
        if item["op"] == "create":
            if current is not None:
                return 409, {"error": "version_conflict", "current": current}
            current = {"id": entity, "version": 1, **item["fields"]}
            self.records[entity] = current
            self.applied[entity] += 1
            return 201, {"record": current}
        assert current is not None
        if item["base_version"] != current["version"]:
            return 409, {"error": "version_conflict", "current": current}
        current.update(item["fields"], version=current["version"] + 1)
        self.applied[entity] += 1
        return 200, {"record": dict(current)}

    async def handle(self, request: httpx.Request) -> httpx.Response:
        now = self.clock.now
        self.attempts.append((now, request.url.path))
        if OUTAGE[0] <= now < OUTAGE[1]:
            raise httpx.ConnectError("link down", request=request)
        path = request.url.path
        if path == "/healthz":
            return httpx.Response(200, json={"status": "ok"})
        if path == "/v1/changes":
            return httpx.Response(200, json={"changes": [], "next": "0", "has_more": False})
        if now < BUSY_UNTIL:
            return httpx.Response(503, json={"error": "unavailable"}, headers={"Retry-After": "1"})
        body = json.loads(request.content)
        if path == "/v1/mutations":
            code, reply = self._apply(body)
            return httpx.Response(code, json=reply)
        results = []
        for item in body["mutations"]:
            code, reply = self._apply(item)
            results.append({"idempotency_key": item["idempotency_key"], "status": code,
                            "body": reply, "replayed": False})  # fmt: skip
        return httpx.Response(200, json={"results": results})


def test_a_week_offline_with_clock_jumps(tmp_path: Path) -> None:
    clock = VirtualClock()
    server = FakeServer(clock)
    store = Store(
        tmp_path / "device",
        synchronous="NORMAL",
        queue_config=QueueConfig(),
        clock=clock.wall,
        rng=random.Random(7),
    )
    engine = SyncEngine(
        store,
        SyncConfig(server_url="http://fieldsync.test", batch_size=10),
        token=lambda: "fst_virtual",
        transport=httpx.MockTransport(server.handle),
        executor=InlineExecutor(),  # type: ignore[arg-type]
        rng=random.Random(11),
        clock=clock.time_module(),  # the loop's own sleeps jump with the virtual loop
    )
    for index in range(30):
        store.record_edit("create", None, {"title": f"before the outage {index}"})
    loop = virtual_loop(clock)
    steps = {
        2 * DAY: ("forward", +DAY),
        3 * DAY: ("edits", 0.0),
        4 * DAY: ("back", -2 * DAY),
        6 * DAY: ("edits", 0.0),
    }

    async def scenario() -> float:
        import asyncio

        runner = asyncio.create_task(engine.run())
        for at, (what, amount) in sorted(steps.items()):
            await asyncio.sleep(OUTAGE[0] + at - clock.now)
            if what == "edits":
                for index in range(10):
                    store.record_edit("create", None, {"title": f"offline day {at / DAY:.0f}"
                                                                f" edit {index}"})  # fmt: skip
                engine.wake()
            else:
                clock.skew += amount
        await asyncio.sleep(OUTAGE[1] - clock.now)
        deadline = OUTAGE[1] + 2 * HOUR
        while clock.now < deadline:
            depth = store.stats()["queue_depth"]
            if depth["pending"] == 0 and depth["leased"] == 0:
                break
            await asyncio.sleep(10)
        drained_after = clock.now - OUTAGE[1]
        await engine.stop()
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        return drained_after

    try:
        drained_after = loop.run_until_complete(scenario())
    finally:
        loop.close()
    depth = store.stats()["queue_depth"]
    store.close()

    per_hour = Counter(int((at - OUTAGE[0]) // HOUR) for at, _ in server.attempts
                       if OUTAGE[0] <= at < OUTAGE[1])  # fmt: skip
    hours = int((OUTAGE[1] - OUTAGE[0]) // HOUR)
    counts = [per_hour.get(hour, 0) for hour in range(hours)]
    probe_cap = SyncConfig("x").connectivity.probe_backoff
    bound = HOUR / (probe_cap.cap * (1 - probe_cap.jitter))
    record_figures(
        "long_outage",
        {
            "outage_days": 7,
            "clock_steps": "+1 day at day 2, -2 days at day 4",
            "edits": len(server.records),
            "attempts_during_outage": sum(counts),
            "attempts_per_hour_max": max(counts),
            "attempts_per_hour_mean": round(sum(counts) / hours, 1),
            "attempts_per_hour_bound": round(bound, 1),
            "drained_after_link_back_s": round(drained_after, 1),
            "queue_after": depth,
        },
    )
    assert depth["pending"] == depth["leased"] == depth["dead"] == 0, depth
    assert len(server.records) == 50
    assert set(server.applied.values()) == {1}
    assert max(counts) <= bound + 2, counts  # a probe per backoff cap, no retry storms
    assert min(counts) >= 1  # it kept probing: never gave up for good
    assert drained_after <= 2 * probe_cap.cap + 60  # back within a couple of probes
