"""The user's command: `fieldsync sync --until-idle` of offline creates, and what its feed carries.

    .venv/bin/python benchmarks/cli_sync_bench.py --smoke --json /tmp/cli_sync.json
    .venv/bin/python benchmarks/cli_sync_bench.py --json  # benchmarks/results/cli_sync_bench.json

Each run makes a fresh device data dir and `fieldsync import`s N creates into it (not timed),
then, each against a fresh server process of its own (`fieldsync-server serve`, SQLite, rate
limit off, an empty database), times:

- the reference: the server's own batch ingest of the very same mutations (read from the
  device's queue: the same fields, under new ids and keys, as another person's) posted
  straight to `POST /v1/mutations/batch` in the engine's batches (its first size, growing
  alike while they come back full) from one kept-alive httpx.AsyncClient, as many in flight
  as the engine keeps
  (`drain_setup.reference_ingest`, which `sync_bench.py` uses too);
- the command as a new user runs it: `fieldsync --data-dir D --server URL sync --until-idle`
  with `FIELDSYNC_TOKEN`, timed from process start to exit, defaults untouched (the
  device's own request rate limit included), its sources compiled to bytecode beforehand as
  an install leaves them (`_compile_sources`). The run then checks every job done, every record
  held at version 1 on the device, and N records on the server.

Each meets an empty database: on one shared server the second of the two met a table already
holding N rows and took longer, so the median of the runs depended on which of the two went
first in most of them. They still take turns going first. The ratio is the reference's time
over the command's, the median of the runs' own ratios; each run also says the CPU seconds of
the server and of the command's process. Then, once, the bytes: the same N creates drained
by the same engine in process (the CLI's `SyncConfig`), through a transport that counts
request bodies of `/v1/mutations*` and response bodies of `GET /v1/changes`, with the install
header (the feed leaves out the device's own writes: server/scope/echoes.py) and, as the
baseline, without it (an app from before: every record comes back).
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from bench_server import ServerProcess, temp_dir
from cpu_probe import CpuWindow, tree
from drain_setup import (
    IN_FLIGHT,
    drain_batches,
    expect_on_server,
    offline_creates,
    offline_device,
    reference_ingest,
)
from results_file import SMOKE_HELP, RunWindow, add_json_option, run_mode, write_results

from app.store.store import Store
from app.sync.engine import SyncConfig, SyncEngine

#: The code these figures depend on: report.py --check fails once it changes after the
#: commit a results file measured (benchmarks/staleness.py).
MEASURES = (
    "benchmarks/cli_sync_bench.py",
    "benchmarks/bench_server.py",
    "benchmarks/drain_setup.py",
    "app/",
    "server/",
)
RATIO_TARGET = 0.70
FEED_BYTES_TARGET = 0.05
LIMIT_S = 900.0


@dataclass(frozen=True)
class Plan:
    runs: int
    edits: int


PLANS = {
    "full": Plan(runs=5, edits=20_000),
    "quick": Plan(runs=3, edits=5_000),
    "smoke": Plan(runs=1, edits=300),
}


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "fieldsync"
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]


def _offline_creates(data_dir: Path, edits: int) -> None:
    """N creates imported with the user's own command, as a day offline leaves them."""
    lines = data_dir.parent / "import.jsonl"
    with lines.open("w") as out:
        for fields in offline_creates(edits):
            out.write(json.dumps(fields) + "\n")
    command = [*_cli(), "--data-dir", str(data_dir), "import", str(lines)]
    subprocess.run(command, check=True, capture_output=True, timeout=LIMIT_S)


def _queued(data_dir: Path) -> list[dict[str, Any]]:
    """The device's queued mutations as the batch endpoint takes them, under new ids."""
    store = Store(data_dir)
    try:
        rows = store.db.execute_sql("SELECT base_version, payload FROM jobs ORDER BY id").fetchall()
    finally:
        store.close()
    mutations = []
    for base_version, payload in rows:
        body = json.loads(payload)
        # Its own ids: the same server then takes the device's, as another person's work.
        mutations.append({"idempotency_key": str(uuid.uuid4()), "entity_id": str(uuid.uuid4()),
                          "op": body["op"], "base_version": base_version,
                          "fields": body["fields"]})  # fmt: skip
    return mutations


def _check_device(data_dir: Path, edits: int) -> None:
    store = Store(data_dir)
    try:
        jobs = dict(store.db.execute_sql("SELECT status, COUNT(*) FROM jobs GROUP BY status"))
        held = store.db.execute_sql(
            "SELECT COUNT(*) FROM work_orders WHERE server_version = 1 AND origin = 'server'"
        ).fetchone()[0]
    finally:
        store.close()
    if jobs != {"done": edits} or held != edits:
        raise RuntimeError(f"device after the command: jobs {jobs}, {held} of {edits} held")


def one_run(edits: int, *, count: bool, reference_first: bool) -> dict[str, Any]:
    """Each on a fresh server of its own: the reference ingest and the command, in the order
    asked, and with `count` the two counted drains after them (on the command's server)."""
    with temp_dir() as root:
        data_dir = root / "device"
        _offline_creates(data_dir, edits)
        mutations = _queued(data_dir)
        for name in ("reference-server", "command-server"):
            (root / name).mkdir()
        ingest_server = ServerProcess(root / "reference-server")
        server = ServerProcess(root / "command-server")
        reference = ingest_server.add_device("bench-reference", user="reference")
        token = server.add_device("bench-phone", user="new-user")
        reader = server.add_device("bench-office-check", user="new-user")
        env = {**os.environ, "FIELDSYNC_TOKEN": token}
        command = [*_cli(), "--data-dir", str(data_dir), "--server", server.base_url, "sync",
                   "--until-idle"]  # fmt: skip
        with ingest_server, server:
            window = CpuWindow({"server": lambda: tree(server.pid)})
            ingest_window = CpuWindow({"server": lambda: tree(ingest_server.pid)})

            def ingest() -> tuple[float, dict[str, float]]:
                ingest_window.start()
                elapsed = asyncio.run(
                    reference_ingest(ingest_server.base_url, reference, mutations)
                )
                return elapsed, ingest_window.stop()

            # Each has an empty database of its own; the runs still take turns going first,
            # so that neither always meets the machine as the other left it.
            if reference_first:
                ingest_s, ingest_cpu = ingest()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            window.start()
            started = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, text=True,
                                  timeout=LIMIT_S, check=False)  # fmt: skip
            command_s = time.perf_counter() - started
            command_cpu = window.stop()
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            device_cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            if not reference_first:
                ingest_s, ingest_cpu = ingest()
            expect_on_server(ingest_server.base_url, reference, edits, "the reference ingest")
            if done.returncode != 0:
                raise RuntimeError(f"fieldsync sync failed: {done.stderr[-2000:]}")
            expect_on_server(server.base_url, reader, edits, "the command")
            _check_device(data_dir, edits)
            result: dict[str, Any] = {
                "ingest_s": ingest_s,
                "command_s": command_s,
                # Where the time went: both ends share the machine's cores.
                "ingest_server_cpu_s": ingest_cpu["server_cpu_s"],
                "command_server_cpu_s": command_cpu["server_cpu_s"],
                "command_device_cpu_s": round(device_cpu, 2),
                "ingest_machine_busy_cores": ingest_cpu["machine_busy_cores"],
                "command_machine_busy_cores": command_cpu["machine_busy_cores"],
            }
            if count:
                for install in (True, False):
                    name = f"bench-counted-{install}"
                    counted = server.add_device(name, user=name)
                    drained = count_bytes(root / name, server.base_url, counted, edits, install)
                    result["bytes" if install else "bytes_with_echoes"] = drained
    return result


class CountingTransport(httpx.AsyncBaseTransport):
    """Counts the bytes of mutation requests and replies and of feed pages."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.counts = {"mutation_request_bytes": 0, "mutation_reply_bytes": 0,
                       "mutation_requests": 0, "feed_bytes": 0, "feed_pages": 0,
                       "feed_entries": 0}  # fmt: skip

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        response = await self.inner.handle_async_request(request)
        content = await response.aread()
        path = request.url.path
        if path.startswith("/v1/mutations"):
            self.counts["mutation_requests"] += 1
            self.counts["mutation_request_bytes"] += len(body)
            self.counts["mutation_reply_bytes"] += len(content)
        elif path == "/v1/changes":
            self.counts["feed_pages"] += 1
            self.counts["feed_bytes"] += len(content)
            if response.status_code == 200:
                self.counts["feed_entries"] += len(json.loads(content)["changes"])
        headers = [(k, v) for k, v in response.headers.items() if k.lower() != "content-encoding"]
        return httpx.Response(response.status_code, headers=headers, content=content)

    async def aclose(self) -> None:
        await self.inner.aclose()


def count_bytes(
    data_dir: Path, base_url: str, token: str, edits: int, install: bool
) -> dict[str, int]:
    """One drain in process, as the command's engine makes it, with its bytes counted."""
    with offline_device(data_dir, edits) as store:
        transport = CountingTransport()
        engine = SyncEngine(
            store, SyncConfig(server_url=base_url), token=lambda: token, transport=transport
        )
        if not install:
            engine._startup_sweep = _without_install(engine)  # type: ignore[method-assign]
        if not asyncio.run(engine.run_until_idle(LIMIT_S)):
            raise RuntimeError(f"the counted drain did not end idle: {engine.last_error}")
        engine.executor.shutdown()
    return transport.counts


def _without_install(engine: SyncEngine) -> Callable[[], None]:
    """The engine's start, then no install header: an app from before the header."""
    sweep = engine._startup_sweep

    def start() -> None:
        sweep()
        engine.client.install = None

    return start


def _compile_sources() -> None:
    """The command starts as an installed app does, from compiled bytecode: an install
    compiles it (pip, Flatpak) or the first run writes it. Where the environment says not to
    write any (`PYTHONDONTWRITEBYTECODE`, as on these machines), every run of the command
    would otherwise compile app/ from source, which no person's second run does."""
    root = Path(__file__).resolve().parent.parent
    for package in ("app", "server"):
        compileall.compile_dir(root / package, quiet=1)


def run(plan: Plan, mode: str, say: Callable[[str], None]) -> dict[str, Any]:
    window = RunWindow()
    _compile_sources()
    samples: list[dict[str, float]] = []
    counted: dict[str, Any] = {}
    for index in range(plan.runs):
        sample = one_run(plan.edits, count=index == 0, reference_first=index % 2 == 0)
        counted = counted or {name: sample.pop(name) for name in ("bytes", "bytes_with_echoes")}
        samples.append(sample)
        say(f"run {index + 1}: ingest {sample['ingest_s']:.2f} s "
            f"(server CPU {sample['ingest_server_cpu_s']:.2f} s), command "
            f"{sample['command_s']:.2f} s (server CPU {sample['command_server_cpu_s']:.2f} s, "
            f"device CPU {sample['command_device_cpu_s']:.2f} s)")  # fmt: skip
    ingest_s = statistics.median(s["ingest_s"] for s in samples)
    command_s = statistics.median(s["command_s"] for s in samples)
    ratios = [s["ingest_s"] / s["command_s"] for s in samples]
    ratio = statistics.median(ratios)
    lean, echoed = counted["bytes"], counted["bytes_with_echoes"]
    feed_share = lean["feed_bytes"] / lean["mutation_request_bytes"]
    return {
        "edits": plan.edits,
        "server_batch_ingest_per_s": round(plan.edits / ingest_s, 1),
        "command_edits_per_s": round(plan.edits / command_s, 1),
        "command_vs_ingest": round(ratio, 3),
        "bytes": lean,
        "bytes_with_echoes": echoed,
        "feed_share_of_mutation_bytes": round(feed_share, 5),
        "echo_feed_share_of_mutation_bytes": round(
            echoed["feed_bytes"] / echoed["mutation_request_bytes"], 5
        ),
        "metadata": {
            "mode": mode,
            "runs": plan.runs,
            "statistic": "median (the ratio: median of each run's own ratio)",
            "samples": samples,
            "ratios": [round(r, 3) for r in ratios],
            "ingest_s_median": round(ingest_s, 3),
            "command_s_median": round(command_s, 3),
            "reference_batches_in_flight": IN_FLIGHT,
            "reference_batches": drain_batches(SyncConfig(server_url="unused")),
            "command": "fieldsync --data-dir D --server URL sync --until-idle (FIELDSYNC_TOKEN)",
            "server": "a fresh separate process with an empty database for each of the two "
            "in every run (fieldsync-server serve, SQLite, loopback): the reference and the "
            "command, taking turns going first",
            "server_flags": "--log-level warning --rate-limit-per-second 0",
            "bytes_counted": "HTTP bodies (no headers) of one in-process drain per variant, "
            "after the first run's command, on its server",
            "targets": {
                "command_ge_70pct_of_ingest": ratio >= RATIO_TARGET,
                "feed_bytes_lt_5pct_of_mutation_bytes": feed_share < FEED_BYTES_TARGET,
            },
            **window.metadata(),
        },
    }


def print_table(results: dict[str, Any]) -> None:
    lean, echoed, meta = results["bytes"], results["bytes_with_echoes"], results["metadata"]
    rows = [
        ("server's own batch ingest", f"{results['server_batch_ingest_per_s']:,.0f}/s"),
        ("fieldsync sync --until-idle", f"{results['command_edits_per_s']:,.0f}/s"),
        ("command / ingest (target ≥ 0.70)", f"{results['command_vs_ingest']:.2f}"),
        ("mutation bytes uploaded", f"{lean['mutation_request_bytes']:,}"),
        ("mutation reply bytes", f"{lean['mutation_reply_bytes']:,}"),
        ("feed bytes / pages / entries",
         f"{lean['feed_bytes']:,} / {lean['feed_pages']} / {lean['feed_entries']}"),
        ("feed share of mutation bytes (< 5 %)", f"{results['feed_share_of_mutation_bytes']:.2%}"),
        ("without the install header: feed bytes / pages",
         f"{echoed['feed_bytes']:,} / {echoed['feed_pages']}"),
    ]  # fmt: skip
    width = max(len(name) for name, _ in rows)
    print(f"{results['edits']:,} offline creates, {meta['mode']} run, {meta['runs']} runs")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5,000 creates")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--runs", type=int, help="override the number of runs")
    add_json_option(parser, "cli_sync_bench")
    args = parser.parse_args(argv)
    plan = PLANS[run_mode(args)]
    if args.runs:
        plan = Plan(args.runs, plan.edits)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    results = run(plan, run_mode(args), say)
    print_table(results)
    if args.json:
        print(f"wrote {write_results('cli_sync_bench', results, args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
