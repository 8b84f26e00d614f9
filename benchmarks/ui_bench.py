"""UI benchmark: event-loop stalls while the queue drains, first paint, resident memory.

    .venv/bin/python benchmarks/ui_bench.py [--quick] [--json FILE]

- stalls: the real window (QML, offscreen, software renderer) with every view-model, on the
  qasync loop, while N queued edits (10,000; 3,000 with --quick) drain to a
  ``fieldsync-server serve`` subprocess on loopback (a separate process: the server must not
  share the UI's GIL). A 5 ms QTimer probe records how late each tick fires; a stall is the
  lateness beyond 5 ms. Targets: p99 < 16 ms, max < 100 ms.
- first paint: a temp data dir whose cache holds 100,000 work orders (raw SQL inserts), from
  opening the store to the first frame that shows list rows. Target < 1 s. Median of runs.
- memory: resident set size (VmRSS) and its peak (VmHWM) after the runs. Target < 250 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_QUICK_BACKEND", "software")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_server import ServerProcess
from results_file import add_json_option, write_results

from app.events import EventBus, QueueChanged  # noqa: E402
from app.executor import StoreExecutor  # noqa: E402
from app.store.store import Store  # noqa: E402
from app.sync.engine import SyncConfig, SyncEngine  # noqa: E402
from ui.bridge import Bridge  # noqa: E402
from ui.qt import QApplication, QElapsedTimer, QQmlApplicationEngine, QTimer, connect  # noqa: E402
from ui.services import Services  # noqa: E402
from ui.viewmodels.app import AppViewModel  # noqa: E402
from ui.window import load_window, set_style  # noqa: E402

PROBE_MS = 5
TARGETS = {"stall_p99_ms": 16.0, "stall_max_ms": 100.0, "first_paint_s": 1.0, "rss_mb": 250.0}


# -- helpers ------------------------------------------------------------------------------


def rss_mb() -> tuple[float, float]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


class Probe:
    """A 5 ms timer; how late each tick came is the loop's stall."""

    def __init__(self) -> None:
        self.timer = QTimer(interval=PROBE_MS)
        self.clock = QElapsedTimer()
        self.stalls: list[float] = []
        connect(self.timer.timeout, self._tick)

    def start(self) -> None:
        self.clock.start()
        self.timer.start()

    def _tick(self) -> None:
        elapsed = self.clock.nsecsElapsed() / 1e6
        self.clock.restart()
        self.stalls.append(max(0.0, elapsed - PROBE_MS))

    def stop(self) -> None:
        self.timer.stop()


class Window:
    """The app's view-models and the QML window over one store, as `fieldsync-gui` runs them."""

    def __init__(self, store: Store, executor: StoreExecutor, bus: EventBus, engine: Any) -> None:
        self.bridge = Bridge()
        self.bridge.attach(bus)
        services = Services(store=store, executor=executor, bridge=self.bridge, engine=engine)
        self.vm = AppViewModel(services)
        self.qml = QQmlApplicationEngine()
        self.window = load_window(self.qml, self.vm, 1280, 800, dark=False)
        self.vm.start()

    async def close(self) -> None:
        await self.vm.aclose()
        self.window.close()
        self.bridge.detach()
        del self.qml


# -- drain --------------------------------------------------------------------------------


async def bench_drain(n_edits: int, workdir: Path) -> dict[str, Any]:
    data = workdir / "device"
    with ServerProcess(workdir) as server:
        url = server.base_url
        token = server.add_device("bench-ui")
        store = Store(data)
        store.import_records(
            {"title": f"Replace pump seal {i:05d}", "site": "Depot 4"} for i in range(n_edits)
        )
        executor = StoreExecutor()
        bus = EventBus()
        config = SyncConfig(server_url=url, request_rate=1e6, reconnect_jitter_s=0)
        engine = SyncEngine(store, config, bus, token=lambda: token, executor=executor)
        window = Window(store, executor, bus, engine)
        await window.vm.wait_idle()
        drained = asyncio.Event()

        def on_event(event: object) -> None:
            depth = event.depth if isinstance(event, QueueChanged) else None
            if depth is not None and depth.get("pending", 0) + depth.get("leased", 0) == 0:
                drained.set()

        unsubscribe = bus.subscribe(on_event)
        probe = Probe()
        probe.start()
        started = time.perf_counter()
        task = asyncio.create_task(engine.run())
        try:
            await asyncio.wait_for(drained.wait(), 600)
            took = time.perf_counter() - started
            await asyncio.sleep(0.5)  # the repaint after the last acknowledgement
        finally:
            probe.stop()
            unsubscribe()
            await engine.stop()
            if not task.done():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await window.close()
            executor.shutdown()
            store.close()
    stalls = probe.stalls
    return {
        "edits": n_edits,
        "drain_s": round(took, 2),
        "edits_per_s": round(n_edits / took),
        "probe_ticks": len(stalls),
        "stall_p50_ms": round(percentile(stalls, 50), 2),
        "stall_p99_ms": round(percentile(stalls, 99), 2),
        "stall_max_ms": round(max(stalls, default=0.0), 2),
        "stalls_over_16ms": sum(1 for s in stalls if s > 16),
        "worst_stall_at_tick": stalls.index(max(stalls)) if stalls else -1,
    }


# -- first paint --------------------------------------------------------------------------


def fill_cache(data: Path, n_rows: int) -> None:
    Store(data).close()  # create and migrate
    import sqlite3

    conn = sqlite3.connect(data / "fieldsync.sqlite3")
    now = time.time()
    rows = (
        (str(uuid.UUID(int=i)), f"Pump check {i:06d}", f"Site {i % 97}", "open", "normal",
         "", "Ana", None, 0, 1, None, None, None, None, "server", now, now)
        for i in range(n_rows)
    )  # fmt: skip
    with conn:
        conn.executemany(
            "INSERT INTO work_orders (id, title, site, status, priority, notes, assignee, "
            "due_date, deleted, server_version, etag, server_snapshot, server_updated_at, "
            "server_updated_by, origin, local_updated_at, last_synced_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    conn.close()


async def first_paint(data: Path) -> float:
    started = time.perf_counter()
    store = Store(data)
    executor = StoreExecutor()
    window = Window(store, executor, EventBus(), None)
    painted = asyncio.Event()

    def on_frame() -> None:
        if window.vm.workOrders.rowCount() > 0:
            painted.set()

    connect(window.window.frameSwapped, on_frame)
    await asyncio.wait_for(painted.wait(), 30)
    took = time.perf_counter() - started
    assert window.vm.workOrders.total > 0
    await window.close()
    executor.shutdown()
    store.close()
    return took


async def bench_first_paint(n_rows: int, runs: int, workdir: Path) -> dict[str, Any]:
    data = workdir / "cache"
    fill_started = time.perf_counter()
    fill_cache(data, n_rows)
    fill_s = time.perf_counter() - fill_started
    times = [await first_paint(data) for _ in range(runs)]
    return {
        "rows": n_rows,
        "fill_s": round(fill_s, 2),
        "first_paint_s": round(statistics.median(times), 3),
        "first_paint_first_run_s": round(times[0], 3),
        "runs": runs,
    }


# -- main ---------------------------------------------------------------------------------


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="fieldsync-ui-bench-"))
    try:
        paint = await bench_first_paint(100_000, 1 if args.quick else 3, workdir)
        rss_after_paint, _ = rss_mb()
        drain = await bench_drain(3_000 if args.quick else 10_000, workdir)
        rss_now, rss_peak = rss_mb()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "drain": drain,
        "first_paint": paint,
        "memory": {
            "rss_after_first_paint_mb": round(rss_after_paint, 1),
            "rss_end_mb": round(rss_now, 1),
            "rss_peak_mb": round(rss_peak, 1),
        },
    }


def table(results: dict[str, Any]) -> str:
    drain, paint, memory = results["drain"], results["first_paint"], results["memory"]
    rows = [
        ("stall p99 while draining", f"{drain['stall_p99_ms']} ms", "< 16 ms",
         drain["stall_p99_ms"] < TARGETS["stall_p99_ms"]),
        ("stall max while draining", f"{drain['stall_max_ms']} ms", "< 100 ms",
         drain["stall_max_ms"] < TARGETS["stall_max_ms"]),
        ("stall p50", f"{drain['stall_p50_ms']} ms", "", None),
        (f"drain {drain['edits']} edits", f"{drain['drain_s']} s ({drain['edits_per_s']}/s)",
         "", None),
        (f"first paint, {paint['rows']} rows (median of {paint['runs']})",
         f"{paint['first_paint_s']} s", "< 1 s", paint["first_paint_s"] < TARGETS["first_paint_s"]),
        ("resident memory, peak", f"{memory['rss_peak_mb']} MB", "< 250 MB",
         memory["rss_peak_mb"] < TARGETS["rss_mb"]),
        ("resident memory after first paint", f"{memory['rss_after_first_paint_mb']} MB", "",
         None),
    ]  # fmt: skip
    width = max(len(r[0]) for r in rows)
    lines = [f"{'measure':<{width}}  {'value':>22}  {'target':>9}  met"]
    for name, value, target, met in rows:
        flag = "" if met is None else ("yes" if met else "NO")
        lines.append(f"{name:<{width}}  {value:>22}  {target:>9}  {flag}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller drain, one paint run")
    add_json_option(parser, "ui_bench")
    args = parser.parse_args()
    from qasync import QEventLoop

    app = QApplication.instance() or QApplication([sys.argv[0]])
    set_style()
    loop = QEventLoop(app)
    asyncio.set_event_loop(loop)
    with loop:
        results = loop.run_until_complete(bench(args))
    results["quick"] = args.quick
    print(table(results))
    if args.json:
        print(f"wrote {write_results('ui_bench', results, args.json)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
