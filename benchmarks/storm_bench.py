"""Reconnect storm: 1,000 devices, each with 20 offline edits, back within 10 s of an outage,
against one and two server processes on one PostgreSQL.

    .venv/bin/python benchmarks/storm_bench.py --smoke --json /tmp/storm.json   # seconds
    .venv/bin/python benchmarks/storm_bench.py --json   # benchmarks/results/storm_bench.json

Each run gets a fresh server database on one throwaway PostgreSQL cluster (durable settings)
and enrols its devices there with `server.auth.add_device` (what `fieldsync-server add-device`
runs), each with its own token, as a worker of its own in a crew of `TEAM_SIZE` (so each
device's feed carries its crew's work). The server is `fieldsync-server serve --workers N`
(`--log-level warning`, every other setting its default: the per-device rate limit in the
database, admission control at 16 requests in flight per process and 256 waiting). Before the
storm, one device sends a few batches and pulls through every process, so the figures are of
warm processes; its edits are not counted.

The devices are `storm_device.py` processes (`CHILDREN` of them, the fleet split evenly), each
running its share on one asyncio loop: every device makes its 20 edits offline (10 creates and
an update of each), then comes back at an instant drawn uniformly from the 10 s window, probes
`/healthz`, waits the app's reconnect jitter, delivers its edits, pulls its feed and goes idle,
as the app's engine does (storm_device.py says how it is the same protocol).

Each run is checked, and the bench fails (after writing its results) when a check fails:
- every edit applied exactly once: in PostgreSQL, each device's 10 work orders at version 2,
  one change-log row per (work order, version), 20 per device, and none else;
- no 5xx answer, no edit given up;
- every device honoured `Retry-After`: no request left before a saturated answer's wait had
  passed (from each device's own send times).

Measured: edits/s (applied edits over the time from the first device back to the last edit
acknowledged), p50/p99 of each device's time from coming back to idle, the server's and
PostgreSQL's CPU seconds per edit and the share of the busy CPU each group took (server,
PostgreSQL, devices: one 2-core machine runs all three), the share of PostgreSQL's active
backends waiting on a lock (`pg_stat_activity` sampled every 20 ms), the 429s answered, and
each server process's resident memory (sampled every 20 ms) before and at its peak.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_device import DeviceChild  # noqa: E402
from bench_server import ServerProcess  # noqa: E402
from cpu_probe import CpuWindow, PostgresWaits, postmaster_pid, tree  # noqa: E402
from results_file import SMOKE_HELP, RunWindow, add_json_option, publish, run_mode  # noqa: E402
from rss import RssSampler  # noqa: E402

from server.auth import add_device  # noqa: E402
from server.db.store import open_store  # noqa: E402
from tests.support.postgres import running_postgres  # noqa: E402

#: The code these figures depend on: report.py --check fails once it changes after the
#: commit a results file measured (benchmarks/staleness.py).
MEASURES = (
    "benchmarks/storm_bench.py",
    "benchmarks/storm_device.py",
    "benchmarks/bench_device.py",
    "benchmarks/bench_server.py",
    "benchmarks/cpu_probe.py",
    "benchmarks/rss.py",
    "app/sync/",
    "app/store/backoff.py",
    "server/",
)
HERE = Path(__file__).resolve().parent
TEAM_SIZE = 10
PREFIX = "storm-"


@dataclass(frozen=True)
class Plan:
    devices: int
    edits: int  # per device: half creates, half updates of them
    window_s: float  # the devices come back within this
    children: int  # device processes
    #: Run by run: server processes, and whether admission control is on (off: the
    #: baseline, every request queued in the process as before it existed).
    order: tuple[tuple[int, bool], ...]
    server_flags: tuple[str, ...] = ()
    baseline_edits: int = 2000  # one device's batches of 100, after each storm


FULL = Plan(devices=1000, edits=20, window_s=10.0, children=4,
            order=((1, True), (2, True), (1, False)))  # fmt: skip
QUICK = Plan(devices=200, edits=20, window_s=2.0, children=2,
             order=((1, True), (2, True), (1, False)))  # fmt: skip
# Two server processes (the harder case), two requests in flight and two waiting in each: 20
# devices within a second meet 429s.
SMOKE = Plan(devices=20, edits=20, window_s=1.0, children=2, order=((2, True),),
             server_flags=("--max-in-flight", "2", "--max-queued", "2"),
             baseline_edits=200)  # fmt: skip
UNBOUNDED = ("--max-in-flight", "0")


class StormServer(ServerProcess):
    """`fieldsync-server serve --workers N`, its defaults kept but the log level."""

    def __init__(self, workdir: Path, db_url: str, workers: int, flags: tuple[str, ...]) -> None:
        super().__init__(workdir, db_url=db_url)
        self.workers = workers
        self.flags = flags

    def command(self) -> list[str]:
        command = super().command()
        at = command.index("--rate-limit-per-second")
        del command[at : at + 2]  # the per-device limit stays on, as deployed
        return [*command, "--workers", str(self.workers), *self.flags]

    def processes(self) -> set[int]:
        """The processes serving: the supervisor's spawned workers (or the one process)."""
        if self.workers == 1:
            return {self.pid}
        return {pid for pid in tree(self.pid) - {self.pid} if b"spawn_main" in _cmdline(pid)}


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def enrol(db_url: str, count: int) -> list[dict[str, str]]:
    """`count` worker devices, each its own person, in crews of TEAM_SIZE; and their tokens."""
    store = open_store(db_url, create=False)
    try:
        devices = []
        with store.db.atomic():  # one commit for the lot (each add is a savepoint in it)
            for index in range(count):
                name = f"{PREFIX}{index:04d}"
                team = f"crew-{index // TEAM_SIZE:03d}"
                token = add_device(store, name, "worker", user=name, team=team)
                devices.append({"name": name, "token": token, "user": name, "team": team})
        return devices
    finally:
        store.close()


def warm_up(server: StormServer, token: str) -> None:
    """A few batches and pulls through every process, so the storm meets warm ones."""
    headers = {"Authorization": f"Bearer {token}"}
    for _ in range(6 * server.workers):
        # A fresh connection each: the kernel spreads them over the processes.
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as client:
            body = {"mutations": [{"idempotency_key": str(uuid.uuid4()),
                                   "entity_id": str(uuid.uuid4()), "op": "create",
                                   "base_version": None, "fields": {"title": "warm"}}
                                  for _ in range(5)]}  # fmt: skip
            client.post("/v1/mutations/batch", json=body).raise_for_status()
            client.get("/v1/changes", params={"limit": 500}).raise_for_status()
            client.get("/v1/me").raise_for_status()


def batch_ingest(server: StormServer, token: str, edits: int) -> float:
    """Edits/s of one device sending `edits` creates in batches of 100, one at a time: the
    same server's ingest with nothing else going on (the baseline of the storm's edits/s)."""
    headers = {"Authorization": f"Bearer {token}"}
    batches = [[{"idempotency_key": str(uuid.uuid4()), "entity_id": str(uuid.uuid4()),
                 "op": "create", "base_version": None,
                 "fields": {"title": "baseline", "site": "Depot 4", "notes": "Leaks at 3 bar."}}
                for _ in range(100)] for _ in range(max(edits // 100, 1))]  # fmt: skip
    with httpx.Client(base_url=server.base_url, headers=headers, timeout=60) as client:
        started = time.perf_counter()
        for batch in batches:
            client.post("/v1/mutations/batch", json={"mutations": batch}).raise_for_status()
        return round(100 * len(batches) / (time.perf_counter() - started), 1)


def applied(db_url: str, devices: int, edits: int) -> dict[str, Any]:
    """What PostgreSQL holds of the devices' edits, and whether each was applied once."""
    creates, updates = edits - edits // 2, edits // 2
    with psycopg2.connect(db_url) as connection, connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(*) FILTER (WHERE version = 2), count(DISTINCT assignee) "
            "FROM work_order WHERE assignee LIKE %s",
            (PREFIX + "%",),
        )
        orders, at_two, owners = cursor.fetchone()
        cursor.execute(
            "SELECT count(*), count(DISTINCT (c.entity_id, c.version)) FROM work_order_change c "
            "JOIN work_order w ON w.id = c.entity_id WHERE w.assignee LIKE %s",
            (PREFIX + "%",),
        )
        changes, distinct = cursor.fetchone()
        cursor.execute(
            "SELECT count(*) FROM (SELECT device FROM work_order_change WHERE device LIKE %s "
            "GROUP BY device HAVING count(*) <> %s) AS off",
            (PREFIX + "%", edits),
        )
        (devices_off,) = cursor.fetchone()
        cursor.execute("SELECT count(*) FROM work_order_change WHERE device LIKE %s",
                       (PREFIX + "%",))  # fmt: skip
        (by_devices,) = cursor.fetchone()
    once = (
        orders == devices * creates
        and at_two == devices * updates
        and owners == devices
        and changes == distinct == by_devices == devices * edits
        and devices_off == 0
    )
    return {"work_orders": orders, "at_version_2": at_two, "change_log_rows": changes,
            "distinct_versions": distinct, "devices_with_other_counts": devices_off,
            "exactly_once": once}  # fmt: skip


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def storm(
    root: Path, cluster: Any, plan: Plan, workers: int, admission: bool, run: int
) -> dict[str, Any]:
    """One storm against `workers` server processes, on a database of its own."""
    db_url = cluster.create_server_database(f"storm_{run}")
    started = time.perf_counter()
    devices = enrol(db_url, plan.devices)
    store = open_store(db_url, create=False)
    try:
        warm_token = add_device(store, "warm-up", "worker")
    finally:
        store.close()
    enrol_s = time.perf_counter() - started
    workdir = Path(tempfile.mkdtemp(prefix=f"server-{run}-", dir=root))
    flags = plan.server_flags if admission else UNBOUNDED
    server = StormServer(workdir, db_url, workers, flags)
    children: list[DeviceChild] = []
    try:
        # The devices make their edits while the server starts (its port is already chosen).
        share = -(-plan.devices // plan.children)
        for number in range(plan.children):
            group = devices[number * share : (number + 1) * share]
            listing = workdir / f"devices-{number}.json"
            listing.write_text(json.dumps(group))
            seed = str(run * 100 + number)
            command = [sys.executable, str(HERE / "storm_device.py"), "--devices", str(listing),
                       "--server", server.base_url, "--edits", str(plan.edits),
                       "--window", str(plan.window_s), "--seed", seed]  # fmt: skip
            children.append(DeviceChild(command, listing.with_suffix(".stderr"), dict(os.environ)))
        server.start(timeout=120.0)
        warm_up(server, warm_token)
        deadline = time.monotonic() + 30
        while len(server.processes()) < workers and time.monotonic() < deadline:
            time.sleep(0.1)
        serving = {f"server-{n}": pid for n, pid in enumerate(sorted(server.processes()))}
        for child in children:
            child.expect("ready")
        say(f"    enrolled, started, warmed up in {time.perf_counter() - started:.1f} s")
        pg = postmaster_pid(cluster.data)
        window = CpuWindow({
            "server": lambda: tree(server.pid),
            "postgresql": lambda: tree(pg),
            "devices": lambda: set().union(*(tree(child.pid) for child in children)),
        })  # fmt: skip
        with RssSampler(serving) as memory, PostgresWaits(db_url) as waits:
            memory.mark()
            window.start()
            go = time.time() + 0.5
            for child in children:
                child.send(f"go {go}")
            rows = [row for child in children for row in child.expect("done")["devices"]]
            cpu = window.stop()
        rss = {"baseline_mib": memory.baseline_mib(), "peak_mib": memory.peak_mib(),
               "growth_mib": memory.growth_mib(), "samples": memory.samples}  # fmt: skip
        baseline = batch_ingest(server, warm_token, plan.baseline_edits)
    finally:
        for child in children:
            child.close()
        server.stop()
    result = summarise(plan, workers, rows, cpu, waits.summary(), rss,
                       applied(db_url, plan.devices, plan.edits), enrol_s)  # fmt: skip
    result["admission"] = admission
    result["server_flags"] = " ".join(flags)
    result["baseline_batch_edits_per_s"] = baseline
    return result


def summarise(
    plan: Plan,
    workers: int,
    rows: list[dict[str, Any]],
    cpu: dict[str, float],
    waits: dict[str, Any],
    rss: dict[str, Any],
    database: dict[str, Any],
    enrol_s: float,
) -> dict[str, Any]:
    statuses: dict[str, int] = {}
    for row in rows:
        for status, count in row["statuses"].items():
            statuses[status] = statuses.get(status, 0) + count
    no_answer: dict[str, int] = {}
    for row in rows:
        for why, count in row["no_answer"].items():
            no_answer[why] = no_answer.get(why, 0) + count
    done = sum(row["done"] for row in rows)
    first_back = min(row["returned"] for row in rows)
    acks = [row["last_ack"] for row in rows if row["last_ack"] is not None]
    span = max(acks) - first_back
    idle = [row["idle"] - row["returned"] for row in rows]
    server_errors = sum(count for status, count in statuses.items() if status.startswith("5"))
    dead = [outcome for row in rows for outcome in row["dead"]]
    violations = sum(row["violations"] for row in rows)
    busy_s = cpu["machine_busy_cores"] * cpu["window_s"]
    groups = ("server", "postgresql", "devices")
    locks = sum(share for name, share in waits["active_share_by_wait"].items()
                if name.startswith("Lock:"))  # fmt: skip
    checks = {
        "exactly_once": database["exactly_once"] and done == plan.devices * plan.edits,
        "no_5xx": server_errors == 0,
        "none_given_up": not dead,
        "retry_after_honoured": violations == 0,
    }
    return {
        "server_processes": workers,
        "devices": len(rows),
        "edits": done,
        "edits_per_s": round(done / span, 1),
        "ack_span_s": round(span, 2),
        "storm_s": round(max(row["idle"] for row in rows) - first_back, 2),
        "idle_s": {
            "p50": round(statistics.median(idle), 2),
            "p99": round(percentile(idle, 0.99), 2),
            "max": round(max(idle), 2),
        },  # fmt: skip
        "requests": sum(row["requests"] for row in rows),
        "statuses": dict(sorted(statuses.items())),
        "no_answer": no_answer,  # requests that met a network error (retried)
        "refused_saturated": sum(row["saturated"] for row in rows),
        "devices_refused": sum(1 for row in rows if row["saturated"]),
        "retry_after_waited_s": round(sum(row["retry_after_s"] for row in rows), 1),
        "retry_after_violations": violations,
        "server_errors": server_errors,
        "given_up": dead[:10],
        "feed_changes": sum(row["changes"] for row in rows),
        "cpu": cpu,
        "cpu_ms_per_edit": {
            group: round(1000 * cpu[f"{group}_cpu_s"] / done, 3) for group in groups
        },  # fmt: skip
        "cpu_share": {
            group: round(cpu[f"{group}_cpu_s"] / busy_s, 3) if busy_s else None for group in groups
        },  # fmt: skip
        "lock_wait_share": round(locks, 3),
        "postgresql_waits": waits,
        "rss": rss,
        "database": database,
        "enrol_s": round(enrol_s, 2),
        "checks": checks,
    }


def print_table(results: dict[str, Any]) -> None:
    meta = results["metadata"]
    print(f"\n{meta['mode']} run: {meta['devices']} devices x {meta['edits']} edits, back within "
          f"{meta['window_s']} s; load {meta['load_average_1m']['start']:.2f} -> "
          f"{meta['load_average_1m']['end']:.2f}")  # fmt: skip
    header = f"{'server processes, admission':28}" + "".join(
        f"{str(run['server_processes']) + (' on' if run['admission'] else ' off'):>16}"
        for run in results["runs"])  # fmt: skip
    print(header)
    lines = [
        ("edits/s", lambda r: f"{r['edits_per_s']:,.0f}"),
        ("baseline batch ingest/s", lambda r: f"{r['baseline_batch_edits_per_s']:,.0f}"),
        ("idle p50 / p99, s", lambda r: f"{r['idle_s']['p50']} / {r['idle_s']['p99']}"),
        ("429 answered", lambda r: r["refused_saturated"]),
        ("5xx answered", lambda r: r["server_errors"]),
        ("server CPU ms/edit", lambda r: r["cpu_ms_per_edit"]["server"]),
        ("PostgreSQL CPU ms/edit", lambda r: r["cpu_ms_per_edit"]["postgresql"]),
        ("CPU share srv/pg/dev", lambda r: "/".join(f"{r['cpu_share'][g]:.0%}"
                                                   for g in ("server", "postgresql", "devices"))),
        ("lock-wait share", lambda r: f"{r['lock_wait_share']:.1%}"),
        ("server RSS peak, MiB", lambda r: max(r["rss"]["peak_mib"].values())),
        ("checks", lambda r: "ok" if all(r["checks"].values()) else "FAILED"),
    ]  # fmt: skip
    for label, pick in lines:
        print(f"{label:28}" + "".join(f"{pick(run)!s:>16}" for run in results["runs"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 devices back within 2 s")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--note", default="", help="said beside the figures")
    add_json_option(parser, "storm_bench")
    args = parser.parse_args(argv)
    mode = run_mode(args)
    plan = {"smoke": SMOKE, "quick": QUICK, "full": FULL}[mode]
    window = RunWindow()
    runs = []
    with (
        tempfile.TemporaryDirectory(prefix="fieldsync-storm-") as scratch,
        running_postgres(durable=mode != "smoke") as cluster,
    ):
        for number, (workers, admission) in enumerate(plan.order):
            result = storm(Path(scratch), cluster, plan, workers, admission, number)
            say(f"  {workers} server process(es), admission {admission}: "
                f"{result['edits_per_s']:,.0f} edits/s, idle p99 {result['idle_s']['p99']} s, "
                f"checks {result['checks']}")  # fmt: skip
            runs.append(result)
    results = {
        "runs": runs,
        "metadata": {
            "mode": mode,
            "quick": mode != "full",
            "note": args.note,
            "devices": plan.devices,
            "edits": plan.edits,
            "window_s": plan.window_s,
            "team_size": TEAM_SIZE,
            "device_processes": plan.children,
            "order": [{"server_processes": w, "admission": a} for w, a in plan.order],
            "baseline": f"one device's {plan.baseline_edits:,} creates in batches of 100, one "
            "at a time, on the same server after its storm",
            "server_flags": " ".join(("--log-level warning", *plan.server_flags)),
            "postgresql": "throwaway cluster, "
            + ("durable settings" if mode != "smoke" else "fsync off"),
            **window.metadata(),
        },
    }
    publish("storm_bench", results, print_table, args.json)
    failed = [f"{run['server_processes']} process(es): {name}" for run in runs
              for name, ok in run["checks"].items() if not ok]  # fmt: skip
    if failed:
        print(f"checks failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
