"""Scope benchmark: a new worker's first sync beside an admin's full pull, the steady-state feed
query, at two table sizes, on SQLite and PostgreSQL; and 50 devices draining at once against
one and two server processes on PostgreSQL.

    .venv/bin/python benchmarks/scope_bench.py --quick --json /tmp/scope.json
    .venv/bin/python benchmarks/scope_bench.py --json      # benchmarks/results/scope_bench.json

Each size is a server database seeded in bulk (`seed.py`: the rows the server's own writes
leave, through COPY on PostgreSQL) with SIZE work orders (1,000,000 and, for the ratio, 10,000;
quick: 10,000 and 1,000) across 2,000 users in 50 teams, each work order assigned to a user and
tagged with the user's team. Among them, spread evenly over the change feed, 500 are assigned
to `new-worker`, a worker without a team: its scope is exactly those 500 at every size, so the
scoped pull's time can be compared across sizes (target: 1M within 1.5x of 10k). The server
is `fieldsync-server serve` in its own process (`--log-level warning`, rate limit off).

- first sync: a fresh device (the real store and engine, `run_until_idle`) of `new-worker`
  pulls its scope (target < 2 s), beside a fresh admin device pulling everything from the same
  server; the time from the engine's start to idle, median of several runs, and each pull is
  checked to have cached exactly the work orders of its scope.
- steady-state feed: a synced device's `GET /v1/changes?since=<its token>` on one kept-alive
  connection, every other query after one new change in its scope (made by an admin between
  queries, not timed): p50 and p99 of the round trip, for the worker and for the admin.
- goodput (PostgreSQL, the larger size): 50 worker devices (in 5 processes of 10), each with
  offline creates in its own scope, start draining at the same instant against
  `serve --workers 1` and `--workers 2`, interleaved; edits acknowledged per second from the
  first start to the last acknowledgement, and the ratio 2 processes / 1.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_device import DeviceChild, engine_config  # noqa: E402
from bench_server import ServerProcess  # noqa: E402
from results_file import add_json_option, write_results  # noqa: E402
from seed import NEW_WORKER, Population, provision, seed_work_orders  # noqa: E402

from app.events import EventBus, SyncProgress  # noqa: E402
from app.store.store import Store  # noqa: E402
from app.sync.engine import SyncEngine  # noqa: E402
from server.database import open_store  # noqa: E402
from tests.support.postgres import PostgresUnavailable, running_postgres  # noqa: E402

HERE = Path(__file__).resolve().parent
FIRST_SYNC_TARGET_S = 2.0
SIZE_RATIO_TARGET = 1.5
DRAIN_DEVICES = 50
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


QUICK = Plan(sizes=(1_000, 10_000), runs=3, admin_runs_large=1, admin_device_max=10_000,
             feed_queries=200,
             drain_edits=40, drain_runs=1)  # fmt: skip
FULL = Plan(sizes=(10_000, 1_000_000), runs=5, admin_runs_large=1, admin_device_max=100_000,
            feed_queries=400, drain_edits=100, drain_runs=1)  # fmt: skip


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
    events = EventBus()
    marks: dict[str, float] = {}

    def on_event(event: object) -> None:
        if isinstance(event, SyncProgress) and event.phase == "pull":
            marks.setdefault("pull", time.perf_counter())
        elif isinstance(event, SyncProgress) and event.phase == "idle" and "pull" in marks:
            marks.setdefault("idle", time.perf_counter())

    events.subscribe(on_event)
    engine = SyncEngine(store, engine_config(base_url), events, token=lambda: token)
    started = time.perf_counter()
    idle = await engine.run_until_idle(3600.0)
    finished = time.perf_counter()
    engine.executor.shutdown()
    if not idle or "idle" not in marks:
        raise RuntimeError("the first sync did not finish")
    cached = store.db.execute_sql("SELECT COUNT(*) FROM work_orders").fetchone()[0]
    return Pull(finished - started, marks["idle"] - marks["pull"], int(cached))


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
    """The feed position past every change so far (the change counter), where a device that
    reads everything stands once synced: paging a million records to learn it is no test."""
    store = open_store(db_url)
    try:
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
    root: Path, base_url: str, devices: list[dict[str, str]], edits: int
) -> dict[str, float]:
    """Edits per second acknowledged by all `devices` draining at once."""
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
        for child in children:  # as close to one instant as one process can make it
            child.send()
        finished = [child.expect("done")["devices"] for child in children]
    finally:
        for child in children:
            child.close()
    rows = [row for group in finished for row in group]
    total = sum(row["done"] for row in rows)
    if total != edits * len(devices):
        raise RuntimeError(f"{total} of {edits * len(devices)} edits acknowledged")
    span = max(row["finished"] for row in rows) - min(row["started"] for row in rows)
    return {"edits": total, "seconds": round(span, 3), "edits_per_s": round(total / span, 1)}


# -- one backend ----------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values)


def bench_size(
    root: Path, db_url: str, size: int, plan: Plan, large: bool, say: Callable[[str], None]
) -> dict[str, Any]:
    started = time.perf_counter()
    population = Population(work_orders=size)
    seeded = seed_work_orders(db_url, population)
    seed_s = time.perf_counter() - started
    say(f"  seeded {seeded['work_orders']:,} work orders in {seed_s:.1f} s")
    tokens = provision(db_url, population)
    workdir = Path(tempfile.mkdtemp(prefix="server-", dir=root))
    figures: dict[str, Any] = {
        "work_orders": size,
        "seed_s": round(seed_s, 2),
        "seed_rows_per_s": round(size / seed_s),
    }
    with ServerProcess(workdir, db_url=db_url) as server:
        admin_runs = plan.admin_runs_large if large else plan.runs
        worker = [first_sync(root, server.base_url, tokens[NEW_WORKER])]
        # A server whose feed is not scoped sends the worker everything: as slow as the
        # admin's pull, so it is run as often.
        scoped = worker[0].cached == population.new_worker_orders
        runs = plan.runs if scoped else admin_runs
        worker += [first_sync(root, server.base_url, tokens[NEW_WORKER]) for _ in range(runs - 1)]
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
        say(f"  first sync: worker {median([p.total_s for p in worker]):.2f} s, admin "
            f"{median([p.total_s for p in admin]) if admin else 'n/a'} s on a device, "
            f"{admin_http_s:.2f} s over HTTP alone")  # fmt: skip
        mine = seeded["new_worker_ids"]
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
            "worker": steady_feed(server.base_url, tokens[NEW_WORKER], tokens["admin"], mine,
                                  plan.feed_queries),
            "admin": steady_feed(server.base_url, tokens["admin"], tokens["admin"], mine,
                                 plan.feed_queries, since=counter_token(db_url)),
        }  # fmt: skip
    figures["drain_devices"] = [
        {"name": name, "token": tokens[name], "user": user, "team": team}
        for name, user, team in population.drain_devices(DRAIN_DEVICES)
    ]
    return figures


def bench_goodput(
    root: Path, db_url: str, devices: list[dict[str, str]], plan: Plan, say: Callable[[str], None]
) -> dict[str, Any]:
    samples: dict[str, list[dict[str, float]]] = {"1": [], "2": []}
    for _ in range(plan.drain_runs):
        for workers in (1, 2):
            workdir = Path(tempfile.mkdtemp(prefix="server-", dir=root))
            server = WorkersServer(workdir, db_url, workers)
            server.start(timeout=120.0)  # N processes importing at once, on a busy machine
            try:
                result = goodput(root, server.base_url, devices, plan.drain_edits)
            finally:
                server.stop()
            samples[str(workers)].append(result)
            say(f"  goodput, {workers} server process(es): {result['edits_per_s']:,.0f} edits/s")
    one = median([s["edits_per_s"] for s in samples["1"]])
    two = median([s["edits_per_s"] for s in samples["2"]])
    return {
        "devices": len(devices),
        "edits_per_device": plan.drain_edits,
        "one_process_edits_per_s": round(one, 1),
        "two_processes_edits_per_s": round(two, 1),
        "scaling_ratio": round(two / one, 3),
        "samples": samples,
    }


@contextmanager
def databases(root: Path, sizes: tuple[int, int]) -> Iterator[dict[str, dict[int, str]]]:
    """Empty databases for each backend and size (PostgreSQL left out, said so, if absent)."""
    urls: dict[str, dict[int, str]] = {
        "sqlite": {size: f"sqlite:///{root / f'scope-{size}.sqlite3'}" for size in sizes}
    }
    try:
        with running_postgres(durable=True) as cluster:
            urls["postgresql"] = {size: cluster.create_database(f"scope_{size}") for size in sizes}
            yield urls
    except PostgresUnavailable as error:
        print(f"PostgreSQL skipped: {error}", file=sys.stderr)
        yield urls


def run(
    plan: Plan, say: Callable[[str], None], done: Callable[[dict[str, Any]], None]
) -> dict[str, Any]:
    """Every backend, PostgreSQL first (the deployment the issue measures); `done(backends)`
    after each, so a long run leaves what it measured so far."""
    backends: dict[str, Any] = {}
    small, large = plan.sizes
    with tempfile.TemporaryDirectory(prefix="fieldsync-scope-") as scratch:
        root = Path(scratch)
        with databases(root, plan.sizes) as urls:
            for backend in sorted(urls, key=lambda name: name != "postgresql"):
                by_size = urls[backend]
                figures: dict[str, Any] = {}
                for size in plan.sizes:
                    say(f"{backend}, {size:,} work orders")
                    figures[str(size)] = bench_size(
                        root, by_size[size], size, plan, size == large, say
                    )
                devices = figures[str(large)].pop("drain_devices")
                figures[str(small)].pop("drain_devices")
                if backend == "postgresql":
                    say(f"{backend}: {DRAIN_DEVICES} devices draining at once")
                    figures["goodput"] = bench_goodput(root, by_size[large], devices, plan, say)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 work orders at most")
    parser.add_argument(
        "--large", type=int, default=None, metavar="N",
        help="work orders of the larger server (default 1,000,000; 10,000 quick)",
    )  # fmt: skip
    parser.add_argument("--note", default="", help="said beside the figures (e.g. the code)")
    add_json_option(parser, "scope_bench")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    if args.large:
        plan = dataclasses.replace(plan, sizes=(plan.sizes[0], args.large))
    started = time.perf_counter()
    load_start = os.getloadavg()[0]

    def results_of(backends: dict[str, Any]) -> dict[str, Any]:
        return {
            "backends": backends,
            "metadata": {
                "mode": "quick" if args.quick else "full",
                "quick": args.quick,
                "note": args.note,
                "sizes": list(plan.sizes),
                "users": Population(work_orders=1).users,
                "teams": Population(work_orders=1).teams,
                "new_worker": "a worker without a team; 500 work orders assigned to it, "
                "spread evenly over the feed",
                "drain_devices": "50 new workers without a team, each creating its edits",
                "runs": plan.runs,
                "statistic": "median (first sync); p50/p99 (feed)",
                "server": "separate process (fieldsync-server serve), loopback",
                "server_flags": "--log-level warning --rate-limit-per-second 0",
                "postgresql": "throwaway cluster, durable settings",
                "load_average_1m": {"start": load_start, "end": os.getloadavg()[0]},
                "elapsed_s": round(time.perf_counter() - started, 1),
            },
        }

    def keep(backends: dict[str, Any]) -> None:
        if args.json:
            write_results("scope_bench", results_of(backends), args.json)

    backends = run(plan, lambda line: print(line, file=sys.stderr, flush=True), keep)
    results = results_of(backends)
    print_table(results)
    if args.json:
        print(f"wrote {write_results('scope_bench', results, args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
