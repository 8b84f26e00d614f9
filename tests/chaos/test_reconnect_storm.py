"""Reconnect storm: many devices regain the link at the same instant; jitter must spread them.

Every device (a real store and sync engine; all on one loop) holds queued edits while the link
is down and probes the server in lock-step (probe backoff without jitter, so the storm is as
sharp as it can be). The link comes back at one instant; the proxy records every request with
`SyncConfig.reconnect_jitter_s` on (its default) and off. The probes themselves arrive together
either way (their own backoff jitter is switched off here on purpose); the figure compared is
the sends that follow them (`/v1/mutations…`: each device sends its queued edits once), per
100 ms of the time each send was due: when the device's own timer (the probe backoff, or the
reconnect jitter) let it go. Forty devices share one process here, so on a busy machine that
process is descheduled for a second at a time, and the timers that fell due meanwhile all send
together when it runs again: the arrival times at the proxy then show the test's share of the
CPU, not the devices' (each phone has its own). They are recorded beside the due times. The
pulls after each flush are counted too, not compared: how tightly they follow the sends
depends on the device's own bookkeeping between the two, not on the jitter.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pytest

from app.store.backoff import BackoffPolicy
from app.store.stats import outstanding_depth
from app.store.store import Store
from app.sync.clock import Sleep
from app.sync.connectivity import ConnectivityConfig
from app.sync.engine import SyncConfig, SyncEngine
from app.sync.transport import TransportConfig
from tests.chaos.conftest import SCALE
from tests.chaos.helpers import add_device, record_figures
from tests.chaos.plans import RequestRecord
from tests.chaos.proxy import FaultProxy
from tests.support.serve import ServerProcess

JITTER_S = SyncConfig.reconnect_jitter_s  # the default
BIN_S = 0.1
SENDS = "/v1/mutations"


def peak_per_bin(times: Iterable[float], since: float) -> int:
    bins = Counter(int((at - since) / BIN_S) for at in times)
    return max(bins.values(), default=0)


def arrivals(records: list[RequestRecord], prefix: str = "") -> list[float]:
    return [r.at for r in records if r.path.startswith(prefix)]


class DueTimes:
    """Each device's timer releases, so that a send can be dated by the timer that let it go.

    The engine's injected `sleep` notes when each completed sleep was due; a send is dated by
    its device's last release before it reached the proxy."""

    def __init__(self) -> None:
        self._released: dict[str, list[float]] = {}

    def sleep_for(self, token: str) -> Sleep:
        released = self._released.setdefault(f"Bearer {token}", [])

        async def sleep(seconds: float) -> None:
            due = time.monotonic() + seconds
            await asyncio.sleep(seconds)
            released.append(due)

        return sleep

    def of_sends(self, records: list[RequestRecord], prefix: str) -> list[float]:
        dues = []
        for record in records:
            if not record.path.startswith(prefix):
                continue
            released = self._released[record.header("authorization") or ""]
            dues.append(released[bisect.bisect_right(released, record.at) - 1])
        return dues


async def storm(
    root: Path, server: ServerProcess, proxy: FaultProxy, devices: int, jitter: float, tag: str
) -> dict[str, float]:
    stores = []
    engines = []
    due_times = DueTimes()
    for index in range(devices):
        name = f"{tag}-{index}"
        token = add_device(server.db_url, name)
        store = Store(root / name, synchronous="NORMAL")
        for edit in range(2):
            store.record_edit("create", None, {"title": f"{name} edit {edit}"})
        config = SyncConfig(
            server_url=proxy.base_url,
            reconnect_jitter_s=jitter,
            transport=TransportConfig(connect_timeout=2.0, read_timeout=10.0),
            connectivity=ConnectivityConfig(
                failures_before_offline=1,
                probe_backoff=BackoffPolicy(initial=1.0, base=1.0, cap=1.0, jitter=0.0),
            ),
        )
        stores.append(store)
        engines.append(
            SyncEngine(
                store, config, token=lambda token=token: token, sleep=due_times.sleep_for(token)
            )
        )
    proxy.link_down()
    tasks = [asyncio.create_task(engine.run()) for engine in engines]
    try:
        await asyncio.sleep(2.5)  # every engine has failed and is probing once a second
        proxy.clear_records()
        up_at = time.monotonic()
        proxy.link_up()
        deadline = up_at + 30.0
        while time.monotonic() < deadline:
            left = 0
            for engine, store in zip(engines, stores, strict=True):
                depth = await engine.executor.run(outstanding_depth, store)
                left += depth["pending"] + depth["leased"]
            if left == 0:
                break
            await asyncio.sleep(0.2)
        drained = time.monotonic() - up_at
        assert left == 0, f"{left} edits still queued 30 s after the link came back"
    finally:
        await asyncio.gather(*(engine.stop(grace_s=2.0) for engine in engines))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for engine, store in zip(engines, stores, strict=True):
            engine.executor.shutdown()
            store.close()
    records = proxy.snapshot()
    return {
        "peak_sends_per_100ms": peak_per_bin(due_times.of_sends(records, SENDS), up_at),
        "peak_send_arrivals_per_100ms": peak_per_bin(arrivals(records, SENDS), up_at),
        "peak_v1_per_100ms": peak_per_bin(arrivals(records, "/v1/"), up_at),
        "peak_all_per_100ms": peak_per_bin(arrivals(records), up_at),
        "requests": len(records),
        "drain_s": round(drained, 2),
    }


@pytest.mark.slow
async def test_reconnect_jitter_spreads_the_storm(
    tmp_path: Path, server_process: ServerProcess, proxy: FaultProxy
) -> None:
    devices = SCALE.storm_devices
    without = await storm(tmp_path / "off", server_process, proxy, devices, 0.0, "off")
    with_jitter = await storm(tmp_path / "on", server_process, proxy, devices, JITTER_S, "on")
    ratio = with_jitter["peak_sends_per_100ms"] / max(without["peak_sends_per_100ms"], 1)
    record_figures(
        "reconnect_storm",
        {
            "devices": devices,
            "jitter_s": JITTER_S,
            "without_jitter": without,
            "with_jitter": with_jitter,
            "peak_ratio_sends": round(ratio, 3),
        },
    )
    # The storm really happened (one loop drives every client, so it is never perfectly sharp).
    assert without["peak_sends_per_100ms"] >= devices // 4, without
    assert ratio <= 0.5, (without, with_jitter)
