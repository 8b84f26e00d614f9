"""Scope benchmark: a new worker's first sync beside an admin's full pull, the steady-state feed
query, at two table sizes, on SQLite and PostgreSQL; and 50 devices draining at once against
one and two server processes on PostgreSQL.

    .venv/bin/python benchmarks/scope_bench.py --quick --json /tmp/scope.json
    .venv/bin/python benchmarks/scope_bench.py --json      # benchmarks/results/scope_bench.json

Each size is a server database seeded in bulk (`seed.py`: the rows the server's own writes
leave, through COPY on PostgreSQL) with SIZE work orders (100,000 and, for the ratio, 10,000;
quick: 10,000 and 1,000; `--large 1000000` for a million, a run of about half an hour) across
2,000 users in 50 teams, each work order assigned to a user and tagged with the user's team.
Among them, spread evenly over the change feed, 500 are assigned to `new-worker`, a worker
without a team: its scope is exactly those 500 at every size, so the scoped pull's time can be
compared across sizes (target: the larger within 1.5x of 10k). The server is
`fieldsync-server serve` in its own process (`--log-level warning`, rate limit off). The full
run stays near 6 minutes on a quiet 2-core machine.

- first sync: a fresh device (the real store and engine, `run_until_idle`) of `new-worker`
  pulls its scope (target < 2 s), beside a fresh admin device pulling everything from the same
  server; the time from the engine's start to idle, median of several runs, and each pull is
  checked to have cached exactly the work orders of its scope. Both sizes' servers run at
  once and the worker's pulls alternate between them, so a busy moment of a shared machine
  falls on both sizes, not on one (the ratio compares like with like).
- steady-state feed: a synced device's `GET /v1/changes?since=<its token>` on one kept-alive
  connection, every other query after one new change in its scope (made by an admin between
  queries, not timed): p50 and p99 of the round trip, for the worker and for the admin.
- goodput (PostgreSQL, the larger size): 50 worker devices (in 5 processes of 10), each with
  offline creates in its own scope, start draining at the same instant against
  `serve --workers 1` and `--workers 2`, interleaved; edits acknowledged per second from the
  first start to the last acknowledgement, and the ratio 2 processes / 1. Runs alternate
  1 2 2 1 …; beside each, the CPU seconds of the server processes, PostgreSQL and the device
  processes, the machine's busy cores (every program on it), and what PostgreSQL's backends
  waited on (`cpu_probe.py`): whether a second process had a core to run on. The share of
  active backend time waiting on a heavyweight lock (`wait_event_type = 'Lock'`: rows,
  transactions, a table's extension) is the issue's figure (target < 10 %), with the
  statements that waited most. The database is vacuumed and checkpointed first, so the
  first drain does not pay for the seed's cleanup.

`--seed-cache DIR` keeps the seeded SQLite databases for the next run (`seed_cache.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_device import DeviceChild, engine_config, timed_sync  # noqa: E402
from bench_server import ServerProcess  # noqa: E402
from cpu_probe import CpuWindow, PostgresWaits, postmaster_pid, tree  # noqa: E402
from results_file import (  # noqa: E402
    SMOKE_HELP,
    RunWindow,
    add_json_option,
    publish,
    run_mode,
    write_results,
)
from seed import NEW_WORKER, Population, provision, seed_work_orders  # noqa: E402
from seed_cache import cached_seed, keep_seed  # noqa: E402

from app.store.store import Store  # noqa: E402
from server.db.store import open_store  # noqa: E402
from tests.support.postgres import PostgresUnavailable, running_postgres  # noqa: E402

#: The code these figures depend on: report.py --check fails once it changes after the
#: commit a results file measured (benchmarks/staleness.py).
MEASURES = (
    "benchmarks/scope_bench.py",
    "benchmarks/seed.py",
    "benchmarks/seed_cache.py",
    "benchmarks/drain_devices.py",
    "benchmarks/bench_device.py",
    "benchmarks/bench_server.py",
    "benchmarks/cpu_probe.py",
    "app/",
    "server/",
)
HERE = Path(__file__).resolve().parent
FIRST_SYNC_TARGET_S = 2.0
SIZE_RATIO_TARGET = 1.5
#: Issue 22: PostgreSQL's active backends wait on a heavyweight lock under 10 % of the time.
LOCK_WAIT_TARGET = 0.10
DRAIN_DEVICES = 50
BACKENDS = ("postgresql", "sqlite")
DEVICES_PER_PROCESS = 10


@dataclass(frozen=True)
class Plan:
    sizes: tuple[int, int]  # (small, large) work orders on the server
    runs: int  # first syncs per device kind and size
    admin_runs_large: int  # admin full pulls of the large server (minutes each at 1M)
    admin_device_max: int  # largest table an admin's device pulls (above: over HTTP alone)
    feed_queries: int
    drain_edits: int  # per device
    drain_runs: int  # per server-process count
    drain_devices: int = DRAIN_DEVICES  # draining at once (DEVICES_PER_PROCESS per process)


QUICK = Plan(sizes=(1_000, 10_000), runs=3, admin_runs_large=1, admin_device_max=10_000,
             feed_queries=200,
             drain_edits=40, drain_runs=1)  # fmt: skip
FULL = Plan(sizes=(10_000, 100_000), runs=3, admin_runs_large=1, admin_device_max=10_000,
            feed_queries=200, drain_edits=100, drain_runs=3)  # fmt: skip
SMOKE = Plan(sizes=(1_000, 2_000), runs=1, admin_runs_large=1, admin_device_max=2_000,
             feed_queries=10, drain_edits=2, drain_runs=1,
             drain_devices=DEVICES_PER_PROCESS)  # fmt: skip


class WorkersServer(ServerProcess):
    """`fieldsync-server serve --workers N` on an existing database."""

    def __init__(self, workdir: Path, db_url: str, workers: int = 1) -> None:
        super().__init__(workdir, db_url=db_url)
        self.workers = workers

    def command(self) -> list[str]:
        return [*super().command(), "--workers", str(self.workers)]


# -- first sync ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Pull:
    total_s: float  # engine start to idle: what the person waits for
    pull_s: float  # first pull event to idle
    cached: int


async def _first_sync(store: Store, base_url: str, token: str) -> Pull:
    timed = await timed_sync(store, engine_config(base_url), token, 3600.0)
    cached = store.db.execute_sql("SELECT COUNT(*) FROM work_orders").fetchone()[0]
    return Pull(timed.total_s, timed.pull_s, int(cached))


def first_sync(root: Path, base_url: str, token: str) -> Pull:
    data_dir = Path(tempfile.mkdtemp(prefix="device-", dir=root))
    store = Store(data_dir)
    try:
        return asyncio.run(_first_sync(store, base_url, token))
    finally:
        store.close()


# -- the steady-state feed ------------------------------------------------------------------


def _feed_since(client: httpx.Client, token: str, since: str | None) -> tuple[str, int, bool]:
    params = {"since": since} if since else {}
    reply = client.get("/v1/changes", params=params, headers={"Authorization": f"Bearer {token}"})
    reply.raise_for_status()
    body = reply.json()
    return body["next"], len(body["changes"]), body["has_more"]


def http_pull(base_url: str, token: str) -> tuple[float, int]:
    """Seconds to page `token`'s whole feed (1,000 a page) on one kept-alive connection, no
    device behind it; and how many records came."""
    records = 0
    since: str | None = None
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=120.0) as client:
        started = time.perf_counter()
        while True:
            params: dict[str, Any] = {"limit": 1000, **({"since": since} if since else {})}
            reply = client.get("/v1/changes", params=params)
            reply.raise_for_status()
            body = reply.json()
            records += sum(1 for change in body["changes"] if not change.get("out_of_scope"))
            since = body["next"]
            if not body["has_more"]:
                return time.perf_counter() - started, records


def latest_token(client: httpx.Client, token: str) -> str | None:
    """Page the whole feed of `token`'s device (untimed): where a synced device stands."""
    since: str | None = None
    while True:
        reply = client.get(
            "/v1/changes",
            params={"limit": 1000, **({"since": since} if since else {})},
            headers={"Authorization": f"Bearer {token}"},
        )
        reply.raise_for_status()
        body = reply.json()
        since = body["next"]
        if not body["has_more"]:
            return since


def counter_token(db_url: str) -> str:
    """The feed position past every change committed so far, where a device that reads
    everything stands once synced (paging a million records to learn it is no test): the
    horizon on PostgreSQL (`Store.horizon`: writers number their changes by transaction id, so
    the counter row no longer moves), the change counter on SQLite."""
    store = open_store(db_url)
    try:
        with store.db.connection_context():
            horizon = store.horizon()
            if horizon is not None:
                return str(horizon)
            counter = store.tables.ChangeCounter
            return str(counter.get(counter.name == "changes").value)
    finally:
        store.close()


def steady_feed(
    base_url: str,
    token: str,
    admin_token: str,
    entity_ids: list[str],
    queries: int,
    since: str | None = None,
) -> dict[str, Any]:
    """p50/p99 of `GET /v1/changes?since=` for a synced device (at `since`, else where paging
    its whole feed ends); every other query comes after one new change in its scope (an
    admin's edit of one of `entity_ids`, untimed)."""
    times: list[float] = []
    answered_changes = 0
    with httpx.Client(base_url=base_url, timeout=60.0) as client:
        since = since or latest_token(client, token)
        versions: dict[str, int] = {}
        for index in range(queries):
            if index % 2 == 1:
                entity_id = entity_ids[index % len(entity_ids)]
                versions[entity_id] = _touch(client, admin_token, entity_id, versions)
            started = time.perf_counter()
            since, count, _ = _feed_since(client, token, since)
            times.append(time.perf_counter() - started)
            answered_changes += count
    times.sort()
    if answered_changes < queries // 2:
        raise RuntimeError(f"the feed answered {answered_changes} changes for {queries // 2} made")
    return {
        "queries": queries,
        "p50_ms": round(1000 * times[len(times) // 2], 2),
        "p99_ms": round(1000 * times[min(len(times) - 1, int(len(times) * 0.99))], 2),
        "changes_answered": answered_changes,
    }


def _touch(client: httpx.Client, token: str, entity_id: str, versions: dict[str, int]) -> int:
    """An admin's edit of `entity_id`; returns its new version."""
    base = versions.get(entity_id)
    if base is None:
        reply = client.get(f"/v1/records/{entity_id}", headers={"Authorization": f"Bearer {token}"})
        reply.raise_for_status()
        base = int(reply.json()["record"]["version"])
    body = {"entity_id": entity_id, "op": "update", "base_version": base,
            "fields": {"notes": f"steady {uuid.uuid4()}"}}  # fmt: skip
    reply = client.post(
        "/v1/mutations",
        json=body,
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": str(uuid.uuid4())},
    )
    reply.raise_for_status()
    return int(reply.json()["record"]["version"])


# -- goodput: 50 devices at once ----------------------------------------------------------------


def goodput(
    root: Path,
    server: WorkersServer,
    devices: list[dict[str, str]],
    edits: int,
    postgres_pid: int | None = None,
) -> dict[str, Any]:
    """Edits per second acknowledged by all `devices` draining at once; beside it, the CPU
    seconds the server processes, PostgreSQL and the devices used meanwhile, the machine's
    busy cores, and what PostgreSQL's backends waited on (`cpu_probe.py`)."""
    base_url = server.base_url
    step = DEVICES_PER_PROCESS
    groups = [devices[i : i + step] for i in range(0, len(devices), step)]
    run_dir = Path(tempfile.mkdtemp(prefix="drain-", dir=root))
    children: list[DeviceChild] = []
    try:
        for number, group in enumerate(groups):
            listing = run_dir / f"devices-{number}.json"
            listing.write_text(json.dumps(group))
            command = [
                sys.executable,
                str(HERE / "drain_devices.py"),
                "--root",
                str(run_dir),
                "--devices",
                str(listing),
                "--server",
                base_url,
                "--edits",
                str(edits),
            ]
            children.append(DeviceChild(command, listing.with_suffix(".stderr"), dict(os.environ)))
        for child in children:
            child.expect("ready")
        probed = {
            "server": lambda: tree(server.pid),
            "devices": lambda: set().union(*(tree(child.pid) for child in children)),
            **({"postgresql": lambda: tree(postgres_pid)} if postgres_pid else {}),
        }
        window = CpuWindow(probed)
        with PostgresWaits(server.db_url) as waits:
            window.start()
            for child in children:  # as close to one instant as one process can make it
                child.send()
            finished = [child.expect("done")["devices"] for child in children]
            cpu = window.stop()
    finally:
        for child in children:
            child.close()
    rows = [row for group in finished for row in group]
    total = sum(row["done"] for row in rows)
    if total != edits * len(devices):
        raise RuntimeError(f"{total} of {edits * len(devices)} edits acknowledged")
    span = max(row["finished"] for row in rows) - min(row["started"] for row in rows)
    per_edit = {
        f"{name.removesuffix('_cpu_s')}_cpu_ms_per_edit": round(1000 * value / total, 3)
        for name, value in cpu.items()
        if name.endswith("_cpu_s")
    }
    # What the rest of the machine took meanwhile: on a shared box, a run it starved.
    ours = sum(value for name, value in cpu.items() if name.endswith("_cpu_s"))
    cpu["others_busy_cores"] = round(
        max(0.0, cpu["machine_busy_cores"] - ours / cpu["window_s"]), 2
    )
    return {"edits": total, "seconds": round(span, 3), "edits_per_s": round(total / span, 1),
            "cpu": cpu, **per_edit, "postgresql_waits": waits.summary()}  # fmt: skip


# -- one backend ----------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values)


@dataclass
class Seeded:
    """One size's server database, seeded and provisioned, with what the seed recorded."""

    size: int
    db_url: str
    population: Population
    tokens: dict[str, str]
    mine: list[str]  # new-worker's work orders
    figures: dict[str, Any]


def seed_size(
    root: Path,
    db_url: str,
    size: int,
    cache: Path | None,
    say: Callable[[str], None],
    drain_devices: int = DRAIN_DEVICES,
) -> Seeded:
    """Seed and provision `db_url` with `size` work orders and `drain_devices` devices to
    drain (SQLite: from `cache` when it holds this size for this code and at least these
    devices, see `seed_cache.py`)."""
    population = Population(work_orders=size)
    sqlite_path = Path(db_url.removeprefix("sqlite:///")) if db_url.startswith("sqlite") else None
    recorded = cached_seed(cache, size, sqlite_path) if cache and sqlite_path else None
    needed = {name for name, _user, _team in population.drain_devices(drain_devices)}
    if recorded is not None and not needed <= recorded["tokens"].keys():
        recorded = None  # seeded for fewer devices (a smoke run's): seed again
        if sqlite_path is not None:
            sqlite_path.unlink()
    from_cache = recorded is not None
    if recorded is None:
        started = time.perf_counter()
        seeded = seed_work_orders(db_url, population)
        recorded = {"seed_s": time.perf_counter() - started, "mine": seeded["new_worker_ids"],
                    "tokens": provision(db_url, population, drain_devices)}  # fmt: skip
        if cache and sqlite_path:
            keep_seed(cache, size, sqlite_path, recorded)
        say(f"  seeded {size:,} work orders in {recorded['seed_s']:.1f} s")
    else:
        say(f"  {size:,} work orders from the seed cache (seeded in {recorded['seed_s']:.1f} s)")
    seed_s = float(recorded["seed_s"])
    figures = {"work_orders": size, "seed_s": round(seed_s, 2),
               "seed_rows_per_s": round(size / seed_s), "seed_from_cache": from_cache}  # fmt: skip
    return Seeded(size, db_url, population, recorded["tokens"], recorded["mine"], figures)


def worker_first_syncs(
    root: Path, seeded: list[Seeded], servers: list[ServerProcess], plan: Plan
) -> list[list[Pull]]:
    """new-worker's first syncs against each size's server in turn (small, large, small, …),
    so that both sizes meet the same moments of a busy machine."""
    pulls = [[first_sync(root, server.base_url, one.tokens[NEW_WORKER])]
             for one, server in zip(seeded, servers, strict=True)]  # fmt: skip
    runs = []
    for index, one in enumerate(seeded):
        # A server whose feed is not scoped sends the worker everything: as slow as the
        # admin's pull, so it is run as often.
        scoped = pulls[index][0].cached == one.population.new_worker_orders
        large = index == len(seeded) - 1
        runs.append(plan.runs if scoped else (plan.admin_runs_large if large else plan.runs))
    for turn in range(1, max(runs)):
        for index, (one, server) in enumerate(zip(seeded, servers, strict=True)):
            if turn < runs[index]:
                pulls[index].append(first_sync(root, server.base_url, one.tokens[NEW_WORKER]))
    return pulls


def measure_size(
    root: Path,
    one: Seeded,
    server: ServerProcess,
    worker: list[Pull],
    plan: Plan,
    large: bool,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """The admin's pulls and the steady-state feed of one size, beside the worker's pulls."""
    size, population, tokens = one.size, one.population, one.tokens
    figures = dict(one.figures)
    scoped = worker[0].cached == population.new_worker_orders
    admin_runs = plan.admin_runs_large if large else plan.runs
    # A device applying a million records takes many minutes: above `admin_device_max`
    # the admin's pull is the feed paged over HTTP alone (measured at every size).
    on_device = size <= plan.admin_device_max
    admin = [first_sync(root, server.base_url, tokens["admin"])
             for _ in range(admin_runs if on_device else 0)]  # fmt: skip
    admin_http_s, paged = http_pull(server.base_url, tokens["admin"])
    if paged != size:
        raise RuntimeError(f"the admin's feed paged {paged} work orders, not {size}")
    for pull, who, wanted in [*((p, "worker", population.new_worker_orders) for p in worker),
                              *((p, "admin", size) for p in admin)]:  # fmt: skip
        if pull.cached != (wanted if who == "admin" or scoped else size):
            raise RuntimeError(f"the {who}'s first sync cached {pull.cached} work orders")
    say(f"  {size:,}: first sync: worker {median([p.total_s for p in worker]):.2f} s, admin "
        f"{median([p.total_s for p in admin]) if admin else 'n/a'} s on a device, "
        f"{admin_http_s:.2f} s over HTTP alone")  # fmt: skip
    figures["first_sync"] = {
        "worker_work_orders": population.new_worker_orders,
        "worker_cached": worker[0].cached,
        "feed_scoped": scoped,
        "worker_s_median": round(median([p.total_s for p in worker]), 3),
        "worker_pull_s_median": round(median([p.pull_s for p in worker]), 3),
        "admin_work_orders": size,
        "admin_s_median": round(median([p.total_s for p in admin]), 3) if admin else None,
        "admin_pull_s_median": round(median([p.pull_s for p in admin]), 3) if admin else None,
        "admin_http_pull_s": round(admin_http_s, 3),
        "worker_runs": len(worker),
        "admin_runs": len(admin),
        "samples": {
            "worker_s": [round(p.total_s, 3) for p in worker],
            "admin_s": [round(p.total_s, 3) for p in admin],
        },  # fmt: skip
    }
    figures["steady_feed"] = {
        "worker": steady_feed(server.base_url, tokens[NEW_WORKER], tokens["admin"], one.mine,
                              plan.feed_queries),
        "admin": steady_feed(server.base_url, tokens["admin"], tokens["admin"], one.mine,
                             plan.feed_queries, since=counter_token(one.db_url)),
    }  # fmt: skip
    return figures


def bench_backend(
    root: Path, by_size: dict[int, str], plan: Plan, cache: Path | None, say: Callable[[str], None]
) -> tuple[dict[str, Any], list[Seeded]]:
    """Both sizes of one backend: seeded first, then both servers up at once while the
    worker's first syncs alternate between them; then each size's other figures."""
    seeded = []
    for size in plan.sizes:
        say(f"  seeding {size:,} work orders")
        seeded.append(seed_size(root, by_size[size], size, cache, say, plan.drain_devices))
    servers = [ServerProcess(Path(tempfile.mkdtemp(prefix="server-", dir=root)), db_url=one.db_url)
               for one in seeded]  # fmt: skip
    try:
        for server in servers:
            server.start(timeout=120.0)
        pulls = worker_first_syncs(root, seeded, servers, plan)
        figures = {
            str(one.size): measure_size(root, one, server, worker, plan, index == 1, say)
            for index, (one, server, worker) in enumerate(zip(seeded, servers, pulls, strict=True))
        }
    finally:
        for server in servers:
            server.stop()
    return figures, seeded


def drain_order(runs: int) -> list[int]:
    """Server-process counts in turn, 1 2 2 1 1 2 …: each run leaves the database a little
    larger and its devices more to pull, so neither count always goes first."""
    return [workers for run in range(runs) for workers in ((1, 2) if run % 2 == 0 else (2, 1))]


def settle(db_url: str) -> None:
    """Vacuum, analyze and checkpoint the database: the work the seed and the first syncs
    left to autovacuum and the checkpointer is done before the drains, not during the first."""
    connection = psycopg2.connect(db_url)
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            cursor.execute("VACUUM (ANALYZE)")
            cursor.execute("CHECKPOINT")
    finally:
        connection.close()


def bench_goodput(
    root: Path,
    db_url: str,
    devices: list[dict[str, str]],
    plan: Plan,
    say: Callable[[str], None],
    postgres_pid: int | None = None,
) -> dict[str, Any]:
    samples: dict[str, list[dict[str, Any]]] = {"1": [], "2": []}
    settle(db_url)
    for workers in drain_order(plan.drain_runs):
        workdir = Path(tempfile.mkdtemp(prefix="server-", dir=root))
        server = WorkersServer(workdir, db_url, workers)
        server.start(timeout=120.0)  # N processes importing at once, on a busy machine
        try:
            result = goodput(root, server, devices, plan.drain_edits, postgres_pid)
        finally:
            server.stop()
        samples[str(workers)].append(result)
        cpu, waits = result["cpu"], result["postgresql_waits"]
        say(f"  goodput, {workers} server process(es): {result['edits_per_s']:,.0f} edits/s; "
            f"CPU s: server {cpu['server_cpu_s']}, PostgreSQL {cpu.get('postgresql_cpu_s')}, "
            f"devices {cpu['devices_cpu_s']}; machine busy {cpu['machine_busy_cores']} of "
            f"{cpu['machine_cores']} cores ({cpu['others_busy_cores']} by other programs); "
            f"active backends waiting on a lock "
            f"{waits['lock_wait_share']:.1%}")  # fmt: skip
    one = median([s["edits_per_s"] for s in samples["1"]])
    two = median([s["edits_per_s"] for s in samples["2"]])
    return {
        "devices": len(devices),
        "edits_per_device": plan.drain_edits,
        "one_process_edits_per_s": round(one, 1),
        "two_processes_edits_per_s": round(two, 1),
        "scaling_ratio": round(two / one, 3),
        **lock_waits(samples),
        "samples": samples,
    }


def lock_waits(samples: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The share of active backend time spent waiting on a heavyweight lock, per server-process
    count (median of its runs) and at worst, against the target; and the statements that
    waited most, over every run."""
    shares = {workers: [run["postgresql_waits"]["lock_wait_share"] for run in runs]
              for workers, runs in samples.items() if runs}  # fmt: skip
    statements: dict[str, float] = {}
    for runs in samples.values():
        for run in runs:
            for name, share in run["postgresql_waits"]["lock_waits_by_statement"].items():
                statements[name] = max(statements.get(name, 0.0), share)
    worst = max(share for values in shares.values() for share in values)
    return {
        "lock_wait_share": {count: round(median(values), 4) for count, values in shares.items()},
        "lock_wait_share_max": worst,
        "lock_wait_target": LOCK_WAIT_TARGET,
        "lock_wait_target_met": worst < LOCK_WAIT_TARGET,
        "lock_waits_by_statement": dict(sorted(statements.items(), key=lambda kv: -kv[1])[:5]),
    }


@contextmanager
def databases(
    root: Path, sizes: tuple[int, int], backends: tuple[str, ...] = BACKENDS
) -> Iterator[tuple[dict[str, dict[int, str]], int | None]]:
    """Empty databases for each backend and size (PostgreSQL left out, said so, if absent),
    and the PostgreSQL server's process id (for its CPU seconds)."""
    urls: dict[str, dict[int, str]] = {}
    if "sqlite" in backends:
        urls["sqlite"] = {size: f"sqlite:///{root / f'scope-{size}.sqlite3'}" for size in sizes}
    if "postgresql" not in backends:
        yield urls, None
        return
    try:
        with running_postgres(durable=True) as cluster:
            urls["postgresql"] = {size: cluster.create_database(f"scope_{size}") for size in sizes}
            yield urls, postmaster_pid(cluster.data)
    except PostgresUnavailable as error:
        print(f"PostgreSQL skipped: {error}", file=sys.stderr)
        yield urls, None


def run(
    plan: Plan,
    say: Callable[[str], None],
    done: Callable[[dict[str, Any]], None],
    cache: Path | None = None,
    only: tuple[str, ...] = BACKENDS,
) -> dict[str, Any]:
    """Every backend, PostgreSQL first (the deployment the issue measures); `done(backends)`
    after each, so a long run leaves what it measured so far."""
    backends: dict[str, Any] = {}
    small, large = plan.sizes
    with tempfile.TemporaryDirectory(prefix="fieldsync-scope-") as scratch:
        root = Path(scratch)
        with databases(root, plan.sizes, only) as (urls, postgres_pid):
            for backend in sorted(urls, key=lambda name: name != "postgresql"):
                by_size = urls[backend]
                say(f"{backend}")
                figures, seeded = bench_backend(root, by_size, plan, cache, say)
                if backend == "postgresql":
                    say(f"{backend}: {plan.drain_devices} devices draining at once")
                    tokens = seeded[-1].tokens
                    drainers = seeded[-1].population.drain_devices(plan.drain_devices)
                    devices = [{"name": name, "token": tokens[name], "user": user, "team": team}
                               for name, user, team in drainers]  # fmt: skip
                    figures["goodput"] = bench_goodput(
                        root, by_size[large], devices, plan, say, postgres_pid
                    )
                small_s = figures[str(small)]["first_sync"]["worker_s_median"]
                large_s = figures[str(large)]["first_sync"]["worker_s_median"]
                figures["worker_first_sync_large_vs_small"] = round(large_s / small_s, 3)
                backends[backend] = figures
                done(backends)
    return backends


def print_table(results: dict[str, Any]) -> None:
    meta = results["metadata"]
    small, large = (str(size) for size in meta["sizes"])
    load = meta["load_average_1m"]
    print(f"\n{meta['mode']} run; load average (1 min) {load['start']:.2f} -> {load['end']:.2f}")
    for backend, figures in results["backends"].items():
        print(f"\n{backend}{'':26}{int(small):>14,}{int(large):>14,}")
        rows: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
            ("seed, rows/s", lambda f: f"{f['seed_rows_per_s']:,}"),
            ("worker first sync (500), s", lambda f: f["first_sync"]["worker_s_median"]),
            ("admin full pull on a device, s", lambda f: f["first_sync"]["admin_s_median"]),
            ("admin feed over HTTP alone, s", lambda f: f["first_sync"]["admin_http_pull_s"]),
            ("worker feed p50 / p99, ms", lambda f: "{p50_ms} / {p99_ms}".format(
                **f["steady_feed"]["worker"])),
            ("admin feed p50 / p99, ms", lambda f: "{p50_ms} / {p99_ms}".format(
                **f["steady_feed"]["admin"])),
        ]  # fmt: skip
        for label, pick in rows:
            print(f"{label:34}{pick(figures[small])!s:>14}{pick(figures[large])!s:>14}")
        ratio = figures["worker_first_sync_large_vs_small"]
        large_s = figures[large]["first_sync"]["worker_s_median"]
        print(f"worker first sync at {int(large):,}: {large_s} s (target < 2 s); "
              f"{ratio}x the {int(small):,} time (target <= 1.5x)")  # fmt: skip
        if "goodput" in figures:
            g = figures["goodput"]
            print(f"goodput, {g['devices']} devices: 1 process {g['one_process_edits_per_s']:,} "
                  f"edits/s, 2 processes {g['two_processes_edits_per_s']:,} edits/s, "
                  f"ratio {g['scaling_ratio']}")  # fmt: skip
            print(f"  active backends waiting on a lock: at most {g['lock_wait_share_max']:.1%} "
                  f"(target < {g['lock_wait_target']:.0%})")  # fmt: skip
            for statement, share in g["lock_waits_by_statement"].items():
                print(f"    {share:.1%} {statement}")
            for workers, runs in g["samples"].items():
                for one in runs:
                    cpu = one["cpu"]
                    waits = one["postgresql_waits"]["active_share_by_wait"]
                    top = ", ".join(f"{name} {share:.0%}" for name, share in [*waits.items()][:3])
                    print(f"  {workers} process(es): {one['edits_per_s']:,} edits/s; CPU ms/edit "
                          f"server {one['server_cpu_ms_per_edit']}, PostgreSQL "
                          f"{one.get('postgresql_cpu_ms_per_edit')}, devices "
                          f"{one['devices_cpu_ms_per_edit']}; machine busy "
                          f"{cpu['machine_busy_cores']} of {cpu['machine_cores']} cores; "
                          f"PostgreSQL active: {top}")  # fmt: skip


def merged(parts: list[Path], note: str) -> dict[str, Any]:
    """One backend per part, joined: the first part's metadata, each part's command, load and
    time under `parts`, and the load average from the earliest start to the latest end."""
    envelopes = [json.loads(part.read_text()) for part in parts]
    backends: dict[str, Any] = {}
    for envelope in envelopes:
        backends.update(envelope["results"]["backends"])
    metadata = dict(envelopes[0]["results"]["metadata"])
    loads = [envelope["results"]["metadata"]["load_average_1m"] for envelope in envelopes]
    metadata["load_average_1m"] = {"start": max(load["start"] for load in loads),
                                   "end": max(load["end"] for load in loads)}  # fmt: skip
    metadata["note"] = note or metadata["note"]
    metadata["parts"] = [
        {"backends": sorted(envelope["results"]["backends"]), "command": envelope["command"],
         "date": envelope["date"], "load_average_1m": envelope["results"]["metadata"][
             "load_average_1m"], "elapsed_s": envelope["results"]["metadata"].get("elapsed_s")}
        for envelope in envelopes
    ]  # fmt: skip
    return {"backends": backends, "metadata": metadata}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 work orders at most")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument(
        "--large", type=int, default=None, metavar="N",
        help="work orders of the larger server (default 100,000; 10,000 quick)",
    )  # fmt: skip
    parser.add_argument("--note", default="", help="said beside the figures (e.g. the code)")
    parser.add_argument(
        "--seed-cache", type=Path, default=None, metavar="DIR",
        help="keep seeded SQLite databases here and reuse them while the seed and the server"
        " schema are unchanged (seed_cache.py); PostgreSQL is always seeded",
    )  # fmt: skip
    parser.add_argument(
        "--backend", choices=BACKENDS, default=None,
        help="measure this backend alone (two runs of one each may go at once; --merge joins)",
    )  # fmt: skip
    parser.add_argument(
        "--merge", nargs="+", type=Path, default=None, metavar="PART",
        help="join the results files of --backend runs into one (--json) and measure nothing",
    )  # fmt: skip
    add_json_option(parser, "scope_bench")
    args = parser.parse_args(argv)
    if args.merge:
        publish("scope_bench", merged(args.merge, args.note), print_table, args.json)
        return 0
    mode = run_mode(args)
    plan = {"smoke": SMOKE, "quick": QUICK, "full": FULL}[mode]
    if args.large:
        plan = dataclasses.replace(plan, sizes=(plan.sizes[0], args.large))
    window = RunWindow()

    def results_of(backends: dict[str, Any]) -> dict[str, Any]:
        return {
            "backends": backends,
            "metadata": {
                "mode": mode,
                "quick": mode != "full",
                "note": args.note,
                "sizes": list(plan.sizes),
                "users": Population(work_orders=1).users,
                "teams": Population(work_orders=1).teams,
                "new_worker": "a worker without a team; 500 work orders assigned to it, "
                "spread evenly over the feed",
                "drain_devices": f"{plan.drain_devices} new workers without a team, each "
                "creating its edits",
                "runs": plan.runs,
                "statistic": "median (first sync); p50/p99 (feed)",
                "first_sync_order": "both sizes' servers up at once, the worker's first syncs "
                "alternating between them",
                "drain_order": drain_order(plan.drain_runs),
                "server": "separate process (fieldsync-server serve), loopback",
                "server_flags": "--log-level warning --rate-limit-per-second 0",
                "postgresql": "throwaway cluster, durable settings",
                **window.metadata(),
            },
        }

    def keep(backends: dict[str, Any]) -> None:
        if args.json:
            write_results("scope_bench", results_of(backends), args.json)

    only = (args.backend,) if args.backend else BACKENDS
    backends = run(plan, lambda line: print(line, file=sys.stderr, flush=True), keep,
                   args.seed_cache, only)  # fmt: skip
    results = results_of(backends)
    publish("scope_bench", results, print_table, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
