"""UI benchmark: event-loop stalls while the queue drains, first paint, resident memory.

    .venv/bin/python benchmarks/ui_bench.py [--quick] [--json [FILE]]

- stalls: the real window (QML, offscreen, software renderer) with every view-model, on the
  qasync loop, while N queued edits (10,000; 3,000 with --quick) drain to a
  ``fieldsync-server serve`` subprocess on loopback (a separate process: the server must not
  share the UI's GIL). A 5 ms QTimer probe records how late each tick fires; a stall is the
  lateness beyond 5 ms. Targets: p99 < 16 ms, max < 100 ms. The drain counts as done only
  when every job is done; a job that died or met a conflict fails the run.
- first paint: a temp data dir whose cache holds 100,000 work orders (raw SQL inserts), from
  opening the store to the first frame that shows list rows. Target < 1 s. Median of runs.
- memory: resident set size (VmRSS) and its peak (VmHWM) after the runs. Target < 250 MB.
- idle memory: `fieldsync-gui --size 360x720` (against a server process, 1,000 work orders)
  beside a bare Qt Quick window of the same size, each in its own process started the same
  way, both left idle for a few seconds. Target: the app <= 1.5x the bare window.
- edit to "Synced": an edit saved while online, from the server's acknowledgement recorded on
  the device (the engine's "done" event) to its list row's badge reading "Synced"; also from
  Save. Target: median < 300 ms.

`--json` alone writes benchmarks/results/ui_bench.json (`results_file.write_results`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_QUICK_BACKEND", "software")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_server import ServerProcess
from results_file import SMOKE_HELP, add_json_option, run_mode, write_results

from app.events import Event, EventBus, QueueChanged, RecordsChanged  # noqa: E402
from app.executor import StoreExecutor  # noqa: E402
from app.store.store import Store  # noqa: E402
from app.sync.engine import SyncConfig, SyncEngine  # noqa: E402
from ui.bridge import Bridge  # noqa: E402
from ui.qt import QApplication, QElapsedTimer, QQmlApplicationEngine, QTimer, connect  # noqa: E402
from ui.services import Services  # noqa: E402
from ui.viewmodels.app import AppViewModel  # noqa: E402
from ui.window import load_window, set_style  # noqa: E402

#: The code these figures depend on: report.py --check fails once it changes after the
#: commit a results file measured (benchmarks/staleness.py).
MEASURES = ("benchmarks/ui_bench.py", "benchmarks/bench_server.py", "ui/", "app/", "server/")
PROBE_MS = 5
TARGETS = {
    "stall_p99_ms": 16.0,
    "stall_max_ms": 100.0,
    "first_paint_s": 1.0,
    "rss_mb": 250.0,
    "idle_rss_ratio": 1.5,
    "edit_to_synced_ms": 300.0,
}


# -- helpers ------------------------------------------------------------------------------


def rss_mb(pid: int | str = "self") -> tuple[float, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
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
        self.services = services
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
            # Nothing pending or leased is not "delivered": a job may have died on the way.
            by_status = await executor.run(job_counts, store)
            if by_status != {"done": n_edits}:
                raise SystemExit(f"ui_bench: the drain did not deliver every edit: {by_status}")
            await asyncio.sleep(0.5)  # the repaint after the last acknowledgement
        finally:
            probe.stop()
            unsubscribe()
            await _shut_down(engine, task, window, executor, store)
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


def job_counts(store: Store) -> dict[str, int]:
    rows = store.db.execute_sql("SELECT status, COUNT(*) FROM jobs GROUP BY status").fetchall()
    return {str(status): int(count) for status, count in rows}


# -- edit to "Synced" ---------------------------------------------------------------------


def done_entities(event: Event) -> list[str]:
    """Work orders whose job the server acknowledged, from one engine event: a job's (or a
    delivery's batch of) "done" states, or the records a delivery wrote back to the cache."""
    if isinstance(event, RecordsChanged):
        return sorted(event.entity_ids)
    changes = getattr(event, "changes", None)
    states = changes if changes is not None else [event]
    return [
        str(getattr(s, "entity_id", "")) for s in states if getattr(s, "status", None) == "done"
    ]


async def bench_edit_to_synced(edits: int, workdir: Path) -> dict[str, Any]:
    data = workdir / "badge-device"
    (workdir / "badge-server").mkdir()  # its own server database: nothing else to pull
    with ServerProcess(workdir / "badge-server") as server:
        token = server.add_device("bench-badge")
        store = Store(data)
        ids = store.import_records(
            {"title": f"Badge check {i:03d}", "site": "Depot 2"} for i in range(edits)
        )
        executor = StoreExecutor()
        bus = EventBus()
        config = SyncConfig(server_url=server.base_url, request_rate=1e6, reconnect_jitter_s=0)
        engine = SyncEngine(store, config, bus, token=lambda: token, executor=executor)
        window = Window(store, executor, bus, engine)
        task = asyncio.create_task(engine.run())
        delivered: dict[str, float] = {}
        unsubscribe = bus.subscribe(
            lambda event: delivered.update(dict.fromkeys(done_entities(event), time.perf_counter()))
        )
        model = window.vm.workOrders
        repainted: dict[int, float] = {}  # row -> when the list last repainted it

        def on_data_changed(first: Any, last: Any, roles: Any = ()) -> None:
            now = time.perf_counter()
            for row in range(first.row(), last.row() + 1):
                repainted[row] = now

        connect(model.dataChanged, on_data_changed)
        connect(
            model.modelReset,
            lambda: repainted.update(dict.fromkeys(range(edits), time.perf_counter())),
        )
        from_delivery: list[float] = []
        from_save: list[float] = []
        try:
            await wait_until(lambda: all_synced(model, edits), 120, "'Synced' on every row")
            rows = {model.get(i)["entityId"]: i for i in range(edits)}
            for n, entity_id in enumerate(ids):
                delivered.pop(entity_id, None)
                saved_at = time.perf_counter()
                await window.services.operations.save_edit(
                    "update", entity_id, {"notes": f"checked {n}"}
                )
                engine.wake()
                row = rows[entity_id]

                def shown_synced(r: int = row, e: str = entity_id) -> bool:
                    # Repainted after the delivery and reading "Synced" (a repaint before the
                    # acknowledgement still shows the edit as pending).
                    return (
                        e in delivered
                        and repainted.get(r, 0.0) >= delivered[e]
                        and model.get(r)["badge"] == "synced"
                    )

                await wait_until(shown_synced, 30, f"'Synced' on row {row} after its edit")
                shown_at = repainted[row]
                from_delivery.append((shown_at - delivered[entity_id]) * 1000)
                from_save.append((shown_at - saved_at) * 1000)
        finally:
            unsubscribe()
            await _shut_down(engine, task, window, executor, store)
    return {
        "edits": edits,
        "delivered_to_synced_median_ms": round(statistics.median(from_delivery), 1),
        "delivered_to_synced_max_ms": round(max(from_delivery), 1),
        "save_to_synced_median_ms": round(statistics.median(from_save), 1),
    }


def all_synced(model: Any, rows: int) -> bool:
    if model.rowCount() < rows:
        return False
    return all(model.get(i)["badge"] == "synced" for i in range(rows))


async def wait_until(condition: Any, limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():  # noqa: ASYNC110 - the badge is a Qt-side state
        if time.monotonic() > deadline:
            raise SystemExit(f"ui_bench: no {what} after {limit_s} s")
        await asyncio.sleep(0.002)


# -- idle memory --------------------------------------------------------------------------

BARE_QML = """
import QtQuick
import QtQuick.Controls
ApplicationWindow {
    width: 360; height: 720; visible: true; title: "bare"
    Label { anchors.centerIn: parent; text: "A bare Qt Quick window" }
}
"""


def bare_window_main(settle_s: float) -> int:
    """Child process: a bare Qt Quick window at 360x720, idle; prints its VmRSS in MB."""
    from PySide6.QtCore import QByteArray, QTimer
    from PySide6.QtQml import QQmlApplicationEngine as Engine
    from PySide6.QtWidgets import QApplication as App

    app = App([sys.argv[0]])
    set_style()
    engine = Engine()
    engine.loadData(QByteArray(BARE_QML.encode()))
    if not engine.rootObjects():
        return 1
    QTimer.singleShot(int(settle_s * 1000), app.quit)
    app.exec()
    print(f"rss_mb {rss_mb()[0]:.1f}", flush=True)
    return 0


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    env.setdefault("QT_QUICK_BACKEND", "software")
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
    return env


def idle_rss_of_app(workdir: Path, settle_s: float) -> float:
    """`fieldsync-gui --size 360x720` against a server process, idle; its VmRSS in MB."""
    data = workdir / "idle-device"
    store = Store(data)
    store.import_records({"title": f"Idle check {i:04d}", "site": "Depot 1"} for i in range(1000))
    store.close()
    gui = Path(sys.executable).parent / "fieldsync-gui"
    command = [str(gui)] if gui.exists() else [sys.executable, "-m", "ui.main"]
    (workdir / "idle-server").mkdir()  # its own server database, not the drain's
    with ServerProcess(workdir / "idle-server") as server:
        env = child_env() | {"FIELDSYNC_TOKEN": server.add_device("bench-idle")}
        log_path = workdir / "gui.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [*command, "--data-dir", str(data), "--server", server.base_url,
                 "--size", "360x720"],
                stdout=log, stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while b"fieldsync-gui running" not in log_path.read_bytes():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(
                        f"ui_bench: fieldsync-gui did not start:\n"
                        f"{log_path.read_text(errors='replace')}"
                    )
                time.sleep(0.1)
            time.sleep(settle_s)  # the first pull answers, the list is drawn, then idle
            rss, _ = rss_mb(process.pid)
        finally:
            process.terminate()
            process.wait(30)
    return rss


def idle_rss_of_bare_window(settle_s: float) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--bare-window", str(settle_s)],
        capture_output=True, text=True, env=child_env(), timeout=120, check=True,
    )  # fmt: skip
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("rss_mb "))
    return float(line.split()[1])


def bench_idle_rss(workdir: Path, settle_s: float) -> dict[str, Any]:
    app = idle_rss_of_app(workdir, settle_s)
    bare = idle_rss_of_bare_window(settle_s)
    return {
        "size": "360x720",
        "settle_s": settle_s,
        "app_rss_mb": round(app, 1),
        "bare_window_rss_mb": round(bare, 1),
        "ratio": round(app / bare, 2),
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


@dataclass(frozen=True)
class Plan:
    idle_s: float
    paint_rows: int
    paint_runs: int
    drain_edits: int
    badge_edits: int


PLANS = {
    "full": Plan(idle_s=5.0, paint_rows=100_000, paint_runs=3, drain_edits=10_000, badge_edits=30),
    "quick": Plan(idle_s=3.0, paint_rows=100_000, paint_runs=1, drain_edits=3_000, badge_edits=10),
    "smoke": Plan(idle_s=1.0, paint_rows=1_000, paint_runs=1, drain_edits=100, badge_edits=2),
}


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="fieldsync-ui-bench-"))
    try:
        plan = PLANS[run_mode(args)]
        idle = bench_idle_rss(workdir, plan.idle_s)
        paint = await bench_first_paint(plan.paint_rows, plan.paint_runs, workdir)
        rss_after_paint, _ = rss_mb()
        drain = await bench_drain(plan.drain_edits, workdir)
        badge = await bench_edit_to_synced(plan.badge_edits, workdir)
        rss_now, rss_peak = rss_mb()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "drain": drain,
        "first_paint": paint,
        "idle_memory": idle,
        "edit_to_synced": badge,
        "memory": {
            "rss_after_first_paint_mb": round(rss_after_paint, 1),
            "rss_end_mb": round(rss_now, 1),
            "rss_peak_mb": round(rss_peak, 1),
        },
    }


def table(results: dict[str, Any]) -> str:
    drain, paint, memory = results["drain"], results["first_paint"], results["memory"]
    idle, badge = results["idle_memory"], results["edit_to_synced"]
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
        ("idle RSS, app at 360x720", f"{idle['app_rss_mb']} MB", "", None),
        ("idle RSS, bare Qt Quick window", f"{idle['bare_window_rss_mb']} MB", "", None),
        ("idle RSS, app / bare window", f"{idle['ratio']}x", "<= 1.5x",
         idle["ratio"] <= TARGETS["idle_rss_ratio"]),
        (f"delivered edit to 'Synced' (median of {badge['edits']})",
         f"{badge['delivered_to_synced_median_ms']} ms", "< 300 ms",
         badge["delivered_to_synced_median_ms"] < TARGETS["edit_to_synced_ms"]),
        ("delivered edit to 'Synced', max", f"{badge['delivered_to_synced_max_ms']} ms", "",
         None),
        ("save to 'Synced' (median)", f"{badge['save_to_synced_median_ms']} ms", "", None),
    ]  # fmt: skip
    width = max(len(r[0]) for r in rows)
    lines = [f"{'measure':<{width}}  {'value':>22}  {'target':>9}  met"]
    for name, value, target, met in rows:
        flag = "" if met is None else ("yes" if met else "NO")
        lines.append(f"{name:<{width}}  {value:>22}  {target:>9}  {flag}")
    return "\n".join(lines)


async def _shut_down(
    engine: Any, task: asyncio.Task[Any], window: Any, executor: Any, store: Any
) -> None:
    """Stop the engine and its task, close the window, then the store's thread and file."""
    await engine.stop()
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await window.close()
    executor.shutdown()
    store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller drain, one paint run")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--bare-window", type=float, metavar="SECONDS", help=argparse.SUPPRESS)
    add_json_option(parser, "ui_bench")
    args = parser.parse_args()
    if args.bare_window is not None:
        return bare_window_main(args.bare_window)
    from qasync import QEventLoop

    app = QApplication.instance() or QApplication([sys.argv[0]])
    set_style()
    loop = QEventLoop(app)
    asyncio.set_event_loop(loop)
    with loop:
        results = loop.run_until_complete(bench(args))
    results["quick"] = run_mode(args) != "full"
    results["mode"] = run_mode(args)
    print(table(results))
    if args.json:
        print(f"wrote {write_results('ui_bench', results, args.json)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
