"""Sync benchmark: draining offline edits to a local server, reconcile, and idle CPU offline.

Every figure is the median of several runs, each with fresh temp dirs (device store and server
database) and a fresh server. The server runs as a separate process (``fieldsync-server serve``
on a free loopback port) so device and server never share a GIL.

    .venv/bin/python benchmarks/sync_bench.py --quick --json /tmp/sync.json
    .venv/bin/python benchmarks/sync_bench.py --json     # benchmarks/results/sync_bench.json

- drain: N offline creates (``Store.import_records``) drained by ``SyncEngine.run_until_idle``
  with the engine's own batches ("batch": ``SyncConfig.batch_size``, growing to
  ``batch_max_size`` while they come back full) and batch_size=1 ("single"), on the kept-alive
  connections and, as the reference, with a fresh connection per request (a transport without
  a keep-alive pool). The rate is N / time until every job is ``done`` (the last job's
  ``finished_at`` in the device's queue; a dead or conflicted job fails the run), and the
  server is then checked to hold all N records. The total (including the reconcile the engine
  does right after the flush) is printed beside it.
- server batch ingest (the reference): the same N creates posted straight to
  ``POST /v1/mutations/batch`` in the engine's batches (its first size, growing alike to
  ``largest_batch``) from one kept-alive httpx.AsyncClient, keeping as many batches in flight
  as the engine does (``SyncConfig.delivery_pipeline``), no device queue
  (``drain_setup.reference_ingest``).
- reconcile: the reference client's N records (made by another device of the same person, so
  in the fresh device's scope) are pulled by a fresh device's engine (``/v1/changes`` pages
  applied to its cache), timed from the pull's start to its end.
- idle CPU: a worker subprocess with pending edits, its server a closed loopback port; process
  CPU time (user + system, all threads) / wall time over the window.

The device's own request-rate limit is lifted (``request_rate`` 1e6) and the server's per-device
rate limit is off (``--rate-limit-per-second 0``): both exist to protect a shared server, not
to be measured here. The server logs at ``warning`` (its per-request INFO line goes nowhere).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from bench_device import UNLIMITED_RATE, engine_config, timed_sync
from bench_server import ServerProcess, free_port, temp_dir
from drain_setup import (
    BATCH,
    IN_FLIGHT,
    LARGEST_BATCH,
    drain_batches,
    expect_on_server,
    offline_creates,
    offline_device,
    reference_ingest,
)
from results_file import SMOKE_HELP, add_json_option, run_mode, write_results

from app.events import ConnectivityChanged, EventBus
from app.records import validate_create
from app.store.store import Store
from app.sync.engine import SyncEngine

#: The code these figures depend on: report.py --check fails once it changes after the
#: commit a results file measured (benchmarks/staleness.py).
MEASURES = (
    "benchmarks/sync_bench.py",
    "benchmarks/bench_device.py",
    "benchmarks/bench_server.py",
    "benchmarks/drain_setup.py",
    "app/",
    "server/",
)
#: The person whose two devices the reconcile uses (the reference writes, the reader pulls).
PERSON = "bench-person"
DRAIN_TARGET = 0.70
DRAIN_LIMIT_S = 1800.0
CONNECTIONS = ("kept_alive", "fresh_connection")
IDLE_TARGET_PERCENT = 1.0  # "≈ 0": under 1 % of one core


@dataclass(frozen=True)
class Plan:
    runs: int
    edits: int  # per batch drain and per reference ingest run
    single_edits: int  # per single (batch_size=1) drain: a rate, so fewer edits suffice
    idle_seconds: float
    idle_pending: int
    #: Run the idle worker beside the other measurements (it needs wall time, not the CPU).
    idle_concurrent: bool


FULL = Plan(
    runs=3,
    edits=10_000,
    # One request per edit: 10,000 took over 10 minutes per run on the 2-CPU test machine.
    single_edits=2_000,
    idle_seconds=60.0,
    idle_pending=1_000,
    idle_concurrent=False,
)
QUICK = Plan(
    runs=3,
    edits=2_000,
    single_edits=200,
    idle_seconds=10.0,
    idle_pending=1_000,
    idle_concurrent=True,
)
SMOKE = Plan(
    runs=1,
    edits=2 * BATCH,
    single_edits=10,
    idle_seconds=3.0,
    idle_pending=20,
    idle_concurrent=True,
)
PLANS = {"full": FULL, "quick": QUICK, "smoke": SMOKE}


# -- measurements ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DrainResult:
    edits: int
    drain_s: float  # until the last job was recorded done
    total_s: float  # run_until_idle, including the pull that follows the flush

    @property
    def rate(self) -> float:
        return self.edits / self.drain_s


def _transport(connection: str) -> httpx.AsyncBaseTransport | None:
    """None: the engine's own pool (kept alive); else a new TCP connection per request."""
    if connection == "kept_alive":
        return None
    return httpx.AsyncHTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))


def measure_drain(edits: int, batch_size: int, connection: str) -> DrainResult:
    with temp_dir() as root:
        (root / "server").mkdir()
        server = ServerProcess(root / "server")
        token = server.add_device("bench-device")
        with offline_device(root / "device", edits) as store, server:
            result = asyncio.run(
                _drain(store, server.base_url, token, batch_size, edits, connection)
            )
            expect_on_server(server.base_url, token, edits, "the drain")
        return result


async def _drain(
    store: Store, base_url: str, token: str, batch_size: int, edits: int, connection: str
) -> DrainResult:
    engine = SyncEngine(
        store,
        engine_config(base_url, batch_size=batch_size),
        EventBus(),
        token=lambda: token,
        transport=_transport(connection),
    )
    started_wall, started = store.clock(), time.perf_counter()
    idle = await engine.run_until_idle(DRAIN_LIMIT_S)
    finished = time.perf_counter()
    engine.executor.shutdown()
    # Drained means every job done (a dead job is not a drained edit), and it was drained at
    # the moment the last one was recorded done: each job's finished_at, by the store's clock.
    done, last_done = store.db.execute_sql(
        "SELECT COUNT(*), MAX(finished_at) FROM jobs WHERE status = 'done'"
    ).fetchone()
    if not idle or done != edits:
        depth = store.stats()["queue_depth"]
        raise RuntimeError(f"the engine did not drain the queue in {DRAIN_LIMIT_S:.0f} s: {depth}")
    return DrainResult(edits, last_done - started_wall, finished - started)


def measure_ingest_then_reconcile(edits: int) -> tuple[float, ReconcileResult]:
    """Edits/s through POST /v1/mutations/batch straight from httpx, in the engine's batches
    and IN_FLIGHT requests at once; then a fresh device reconciles: the reference client was the
    other device that made the changes.
    """
    mutations = [
        {
            "idempotency_key": str(uuid.uuid4()),
            "entity_id": str(uuid.uuid4()),
            "op": "create",
            "base_version": None,
            "fields": validate_create(fields),
        }
        for fields in offline_creates(edits)
    ]
    with temp_dir() as root:
        server = ServerProcess(root)
        # A worker's feed carries only its scope: the reader is the reference's person's phone.
        token = server.add_device("bench-reference", user=PERSON)
        reader = server.add_device("bench-reader", user=PERSON)
        with server:
            elapsed = asyncio.run(reference_ingest(server.base_url, token, mutations))
            expect_on_server(server.base_url, token, edits, "the reference ingest")
            (root / "device").mkdir()
            store = Store(root / "device")
            try:
                reconcile = asyncio.run(_reconcile(store, server.base_url, reader, edits))
                cached = store.db.execute_sql("SELECT COUNT(*) FROM work_orders").fetchone()[0]
            finally:
                store.close()
        if cached != edits:
            raise RuntimeError(f"device cache holds {cached} records, expected {edits}")
    return edits / elapsed, reconcile


@dataclass(frozen=True)
class ReconcileResult:
    changes: int
    pull_s: float
    total_s: float


async def _reconcile(store: Store, base_url: str, token: str, changes: int) -> ReconcileResult:
    timed = await timed_sync(store, engine_config(base_url, batch_size=BATCH), token, 600.0)
    if timed.received != changes:
        raise RuntimeError(f"pulled {timed.received} changes, expected {changes}")
    return ReconcileResult(changes, timed.pull_s, timed.total_s)


# -- idle CPU (a separate worker process) ---------------------------------------------------

_IDLE_CHILD = "--idle-child"


class IdleMeasurement:
    """The idle worker subprocess: ``start()``, then ``result()`` waits for its figures."""

    def __init__(self, seconds: float, pending: int) -> None:
        self.seconds = seconds
        self.pending = pending
        self._root = Path(tempfile.mkdtemp(prefix="fieldsync-syncbench-idle-"))
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> IdleMeasurement:
        command = [
            sys.executable, os.path.abspath(__file__), _IDLE_CHILD, str(self._root),
            str(self.seconds), str(self.pending), str(free_port()),
        ]  # fmt: skip
        self._process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        return self

    def result(self) -> dict[str, Any]:
        assert self._process is not None
        try:
            out, err = self._process.communicate(timeout=self.seconds + 120)
        finally:
            shutil.rmtree(self._root, ignore_errors=True)
        if self._process.returncode != 0:
            raise RuntimeError(f"idle child failed: {err[-2000:]}")
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result


def idle_child(root: Path, seconds: float, pending: int, port: int) -> None:
    """The worker against a closed port: how much CPU does it burn while offline?"""
    import resource

    def cpu_now() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
        return usage.ru_utime + usage.ru_stime

    store = Store(root)
    store.import_records(offline_creates(pending))
    # Nothing listens on this port: every connect is refused at once (offline, not slow).
    base_url = f"http://127.0.0.1:{port}"

    async def main() -> dict[str, Any]:
        events = EventBus()
        states: list[str] = []
        offline_at: list[tuple[float, float]] = []  # (wall, cpu) when it first went offline

        def on_event(event: object) -> None:
            if isinstance(event, ConnectivityChanged):
                states.append(event.state)
                if event.state == "offline" and not offline_at:
                    offline_at.append((time.perf_counter(), cpu_now()))

        events.subscribe(on_event)
        engine = SyncEngine(
            store, engine_config(base_url, batch_size=BATCH), events, token=lambda: "x"
        )
        probes = [0]
        healthz = engine.client.healthz

        async def counted_healthz() -> bool:
            probes[0] += 1
            return await healthz()

        engine.client.healthz = counted_healthz  # type: ignore[method-assign]
        cpu_start = cpu_now()
        wall_start = time.perf_counter()
        await engine.run_until_idle(seconds)
        wall = time.perf_counter() - wall_start
        cpu = cpu_now() - cpu_start
        engine.executor.shutdown()
        depth = store.stats()["queue_depth"]
        result: dict[str, Any] = {
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 4),
            "cpu_percent": 100.0 * cpu / wall,
            "connectivity": states,
            "healthz_probes": probes[0],
            "pending_after": depth["pending"],
        }
        if offline_at:
            wall_off, cpu_off = offline_at[0]
            steady_wall = wall_start + wall - wall_off
            result["went_offline_after_s"] = round(wall_off - wall_start, 3)
            result["cpu_s_until_offline"] = round(cpu_off - cpu_start, 4)
            result["cpu_percent_after_offline"] = (
                100.0 * (cpu - (cpu_off - cpu_start)) / steady_wall
            )
        return result

    print(json.dumps(asyncio.run(main())))
    store.close()


# -- report ---------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values)


def spread(values: list[float], fmt: str) -> str:
    return f"{format(min(values), fmt)}–{format(max(values), fmt)}"


def run(plan: Plan, scale: str, say: Callable[[str], None]) -> dict[str, Any]:
    quick = scale != "full"
    load_start = os.getloadavg()[0]  # other work on the machine skews every figure
    drains: dict[str, dict[str, list[DrainResult]]] = {
        connection: {"batch": [], "single": []} for connection in CONNECTIONS
    }
    ingest: list[float] = []
    reconciles: list[ReconcileResult] = []
    idle = IdleMeasurement(plan.idle_seconds, plan.idle_pending)
    if plan.idle_concurrent:
        idle.start()
    for index in range(plan.runs):
        # Interleaved run by run so machine noise hits every system alike.
        rate, reconcile = measure_ingest_then_reconcile(plan.edits)
        ingest.append(rate)
        reconciles.append(reconcile)
        say(f"run {index + 1}/{plan.runs}: server ingest {rate:,.0f}/s")
        say(f"run {index + 1}/{plan.runs}: reconcile {reconcile.pull_s:.2f} s")
        for mode, size, edits in (("batch", BATCH, plan.edits), ("single", 1, plan.single_edits)):
            for connection in CONNECTIONS:
                result = measure_drain(edits, size, connection)
                drains[connection][mode].append(result)
                say(f"run {index + 1}/{plan.runs}: drain {mode} {connection} {result.rate:,.0f}/s")
    if not plan.idle_concurrent:
        idle.start()
    idles = [idle.result()]
    say(f"idle CPU offline {idles[0]['cpu_percent']:.3f} %")

    rates = {
        connection: {mode: median([r.rate for r in rs]) for mode, rs in by_mode.items()}
        for connection, by_mode in drains.items()
    }
    kept, fresh = rates["kept_alive"], rates["fresh_connection"]
    ingest_rate = median(ingest)
    reconcile_s = median([r.pull_s for r in reconciles])
    idle_percent = median([i["cpu_percent"] for i in idles])
    ratio = kept["batch"] / ingest_rate

    def per_mode(
        pick: Callable[[list[DrainResult]], float], digits: int
    ) -> dict[str, dict[str, float]]:
        return {
            connection: {mode: round(pick(rs), digits) for mode, rs in by_mode.items()}
            for connection, by_mode in drains.items()
        }

    results = {
        "drain_kept_alive_edits_per_s": {mode: round(rate, 1) for mode, rate in kept.items()},
        "drain_fresh_connection_edits_per_s": {
            mode: round(rate, 1) for mode, rate in fresh.items()
        },
        "drain_kept_alive_vs_fresh": {mode: round(kept[mode] / fresh[mode], 3) for mode in kept},
        "server_batch_ingest_per_s": round(ingest_rate, 1),
        "reconcile_10k_changes_s": round(reconcile_s, 3),
        "idle_cpu_percent_offline": round(idle_percent, 3),
        "metadata": {
            "mode": scale,
            "runs": plan.runs,
            "statistic": "median",
            "edits_per_drain": {"batch": plan.edits, "single": plan.single_edits},
            "edits_per_reference_ingest": plan.edits,
            "reference_batches_in_flight": IN_FLIGHT,
            "reference_batches": drain_batches(engine_config("unused", batch_size=BATCH)),
            "engine_batches_in_flight": IN_FLIGHT,
            "drain_ends": "every job done (none dead or in conflict), then the server is checked "
            "to hold every record",
            "fresh_connection": "a new TCP connection per request (transport without a "
            "keep-alive pool)",
            "reconcile_changes": plan.edits,
            "reconcile_note": (
                f"{scale} mode: {plan.edits} changes, not 10,000"
                if plan.edits != 10_000
                else "10,000 changes"
            ),
            "drain_note": (
                f"{scale} mode: {plan.edits} edits per batch drain and reference ingest, "
                f"{plan.single_edits} per single drain, not 10,000"
                if quick
                else f"10,000 edits per batch drain and reference ingest, "
                f"{plan.single_edits} per single drain"
            ),
            "idle_window_s": plan.idle_seconds,
            "idle_pending_jobs": plan.idle_pending,
            "idle_ran_concurrently_with_other_measurements": plan.idle_concurrent,
            "server": "separate process (fieldsync-server serve, SQLite, loopback)",
            "server_flags": "--log-level warning --rate-limit-per-second 0",
            "device_request_rate": UNLIMITED_RATE,
            "batch_size": {"batch": BATCH, "single": 1},
            "drain_batches": {
                mode: drain_batches(engine_config("unused", batch_size=size))
                for mode, size in (("batch", BATCH), ("single", 1))
            },
            "drain_total_s_median": per_mode(lambda rs: median([r.total_s for r in rs]), 3),
            "drain_s_median": per_mode(lambda rs: median([r.drain_s for r in rs]), 3),
            "reconcile_engine_total_s_median": round(median([r.total_s for r in reconciles]), 3),
            "drain_batch_vs_ingest_ratio": round(ratio, 3),
            "drain_single_vs_ingest_ratio": round(kept["single"] / ingest_rate, 3),
            "targets": {
                "drain_batch_ge_70pct_of_ingest": ratio >= DRAIN_TARGET,
                "idle_cpu_approx_zero_lt_1pct": idle_percent < IDLE_TARGET_PERCENT,
            },
            "samples": {
                "server_batch_ingest_per_s": [round(v, 1) for v in ingest],
                "drain_edits_per_s": {
                    connection: {
                        mode: [round(r.rate, 1) for r in rs] for mode, rs in by_mode.items()
                    }
                    for connection, by_mode in drains.items()
                },
                "reconcile_pull_s": [round(r.pull_s, 3) for r in reconciles],
                "idle": idles,
            },
            "load_average_1m": {"start": load_start, "end": os.getloadavg()[0]},
        },
    }
    print_table(results, drains, ingest, reconciles, idles, plan, quick)
    return results


def print_table(
    results: dict[str, Any],
    drains: dict[str, dict[str, list[DrainResult]]],
    ingest: list[float],
    reconciles: list[ReconcileResult],
    idles: list[dict[str, Any]],
    plan: Plan,
    quick: bool,
) -> None:
    meta = results["metadata"]
    ingest_rate = results["server_batch_ingest_per_s"]
    print()
    print(
        f"fieldsync sync benchmark ({'QUICK: ' if quick else ''}{plan.edits:,} edits per batch "
        f"drain, {plan.single_edits:,} per single drain, "
        f"{plan.edits:,} changes reconciled, idle window {plan.idle_seconds:.0f} s; "
        f"median of {plan.runs} runs)"
    )
    print("server: separate process (fieldsync-server serve, SQLite) on loopback")
    load = meta["load_average_1m"]
    print(f"load average (1 min) {load['start']:.2f} at start, {load['end']:.2f} at end")
    print()
    header = f"{'measurement':<44} {'median':>12} {'runs (min–max)':>20} {'vs ingest':>10}"
    print(header)
    print("-" * len(header))
    print(
        f"{f'server batch ingest ({BATCH}–{LARGEST_BATCH}/req, {IN_FLIGHT} in flight)':<44} "
        f"{ingest_rate:>10,.0f}/s {spread(ingest, ',.0f'):>20} {'1.00':>10}"
    )
    for mode in ("batch", "single"):
        print(f"drain {mode}: {meta['drain_batches'][mode]}")
        for connection in CONNECTIONS:
            rates = [r.rate for r in drains[connection][mode]]
            rate = median(rates)
            label = f"  {connection}"
            print(
                f"{label:<44} {rate:>10,.0f}/s {spread(rates, ',.0f'):>20} "
                f"{rate / ingest_rate:>10.2f}"
            )
            times = [r.drain_s for r in drains[connection][mode]]
            totals = [r.total_s for r in drains[connection][mode]]
            print(f"{'    time to drain':<44} {median(times):>11.2f}s {spread(times, '.2f'):>20}")
            print(
                f"{'    run_until_idle incl. pull-back':<44} {median(totals):>11.2f}s "
                f"{spread(totals, '.2f'):>20}"
            )
        ratio = results["drain_kept_alive_vs_fresh"][mode]
        print(f"{'  kept-alive / fresh connection':<44} {ratio:>11.2f}x")
    pulls = [r.pull_s for r in reconciles]
    print(
        f"{f'reconcile {plan.edits:,} changes (pull)':<44} "
        f"{median(pulls):>11.2f}s {spread(pulls, '.2f'):>20}"
    )
    cpu = [i["cpu_percent"] for i in idles]
    print(
        f"{f'idle CPU offline ({plan.idle_seconds:.0f} s window)':<44} "
        f"{median(cpu):>11.3f}% {spread(cpu, '.3f'):>20}"
    )
    steady = [i["cpu_percent_after_offline"] for i in idles if "cpu_percent_after_offline" in i]
    if steady:
        print(
            f"{'  after it went offline (steady state)':<44} "
            f"{median(steady):>11.3f}% {spread(steady, '.3f'):>20}"
        )
    print()
    targets = meta["targets"]
    ratio = meta["drain_batch_vs_ingest_ratio"]
    met = "MET" if targets["drain_batch_ge_70pct_of_ingest"] else "NOT MET"
    print(
        f"target drain ≥ 70 % of ingest: {met} "
        f"(batch {ratio:.0%}, single {meta['drain_single_vs_ingest_ratio']:.0%})"
    )
    print(
        f"target idle CPU ≈ 0 (< {IDLE_TARGET_PERCENT:g} %): "
        f"{'MET' if targets['idle_cpu_approx_zero_lt_1pct'] else 'NOT MET'} ({median(cpu):.3f} %)"
    )
    if quick:
        print(
            f"QUICK mode: {plan.edits:,} edits (single: {plan.single_edits:,}) and "
            f"{plan.edits:,} changes, not 10,000; idle window "
            f"{plan.idle_seconds:.0f} s, not 60 s, run beside the other measurements"
        )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == _IDLE_CHILD:
        idle_child(Path(argv[1]), float(argv[2]), int(argv[3]), int(argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a run under a minute")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    add_json_option(parser, "sync_bench")
    parser.add_argument("--runs", type=int, help="override the number of runs")
    args = parser.parse_args(argv)
    plan = PLANS[run_mode(args)]
    if args.runs:
        plan = Plan(**{**plan.__dict__, "runs": args.runs})

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    started = time.perf_counter()
    results = run(plan, run_mode(args), say)
    results["metadata"]["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(f"elapsed {results['metadata']['elapsed_s']:.1f} s")
    if args.json:
        print(f"wrote {write_results('sync_bench', results, args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
