"""Sync-server throughput: mutations/s through the single and the batch endpoint, beside the
database writing the same rows and beside an HTTP server that does nothing, and /healthz latency.

Runs `fieldsync-server serve` in its own process as it is deployed (`--log-level info`: one
JSON access-log line per request, written to a file; metrics counted; rate limit off) on
loopback, once on SQLite and once on a throwaway PostgreSQL cluster the bench starts (durable
settings). Every figure is the median of several runs, interleaved run by run so machine noise
hits every measurement alike:

- single: `POST /v1/mutations`, one create per request, on one kept-alive connection and,
  as the reference, on a fresh connection per request;
- batch: `POST /v1/mutations/batch`, 100 creates per request (the engine's batch), likewise,
  and with two clients each keeping one batch in flight (`two_in_flight`);
- raw (the ceiling): the same rows through the bare DB-API cursor, in the server's
  transactions (benchmarks/raw_writer.py says exactly what it sends), into tables as large
  as the server's were when its own run began: the server's database takes the rows of
  every measurement (fresh connections, two in flight), and inserts into random-key indexes
  cost more as they grow, so the raw driver and the floor below are first levelled with it
  (untimed creates);
- bare_asgi (the HTTP floor): the same client sending the single endpoint's requests to an
  ASGI app that does nothing, under the same uvicorn and protocol (benchmarks/bare_asgi.py:
  httptools), under uvicorn's h11 parser instead (what the parser costs), and writing the raw
  driver's rows for each request's create in one worker thread (`bare_asgi_raw_rows`: the
  floor of this stack doing the store's work, with no authentication, validation or logs),
  and the batch endpoint's requests to that app, each answered with the replies its rows
  stored (the batch endpoint's floor);
- cpu: CPU time per single mutation of the client, the server process and PostgreSQL,
  beside the wall time: on 2 cores they take turns, so their sum is the wall's floor;
- healthz: `GET /healthz` median round trip, kept-alive and fresh, and the bare app's.

    python benchmarks/server_bench.py --quick --json /tmp/server.json
    python benchmarks/server_bench.py --json      # benchmarks/results/server_bench.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_server import ServerProcess  # noqa: E402
from cpu_probe import CpuWindow, postmaster_pid, tree  # noqa: E402
from raw_writer import RawWriter, work_orders_in  # noqa: E402
from results_file import SMOKE_HELP, RunWindow, add_json_option, publish, run_mode  # noqa: E402

from server.db.store import open_store  # noqa: E402
from server.embedded import provision_device  # noqa: E402
from tests.support.postgres import PostgresUnavailable, running_postgres  # noqa: E402

#: The code these figures depend on: report.py --check fails once it changes after the
#: commit a results file measured (benchmarks/staleness.py).
MEASURES = (
    "benchmarks/server_bench.py", "benchmarks/bench_server.py", "benchmarks/raw_writer.py",
    "benchmarks/bare_asgi.py", "server/",
)  # fmt: skip
BATCH_SIZE = 100
FIELDS = {"title": "Inspect valve", "site": "Depot 4", "notes": "x" * 200}
CONNECTIONS = ("kept_alive", "fresh_connection")
#: Each backend's databases: the server's, the raw driver's, the raw-rows floor's.
NAMES = ("bench", "raw", "floor")
LOG_LEVEL = "info"


class BareAsgiProcess(ServerProcess):
    """benchmarks/bare_asgi.py on a free loopback port (it answers /healthz like any path),
    with `mode` `served` (httptools, as the server parses), `h11`, or `raw DB_URL`."""

    def __init__(self, workdir: Path, *mode: str) -> None:
        super().__init__(workdir)
        self.mode = mode
        self.log_path = workdir / f"bare-{mode[0]}.log"

    def command(self) -> list[str]:
        return [sys.executable, str(Path(__file__).resolve().parent / "bare_asgi.py"),
                str(self.port), *self.mode]  # fmt: skip


def _client(base_url: str, token: str, connection: str) -> httpx.Client:
    # No keep-alive pool: httpx closes each connection after its response and opens a new one.
    keep = None if connection == "kept_alive" else 0
    limits = httpx.Limits(max_keepalive_connections=keep)
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.Client(base_url=base_url, headers=headers, timeout=120, limits=limits)


def _create(key: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "entity_id": str(uuid.uuid4()),
        "op": "create",
        "base_version": None,
        "fields": FIELDS,
    }
    return body if key is None else {"idempotency_key": key, **body}


def single_rate(client: httpx.Client, count: int, expect: int = 201) -> float:
    bodies = [_create() for _ in range(count)]
    started = time.perf_counter()
    for body in bodies:
        key = str(uuid.uuid4())
        response = client.post("/v1/mutations", json=body, headers={"Idempotency-Key": key})
        assert response.status_code == expect, response.text
    return count / (time.perf_counter() - started)


def _batches(count: int) -> list[dict[str, Any]]:
    return [
        {"mutations": [_create(str(uuid.uuid4())) for _ in range(min(BATCH_SIZE, count - at))]}
        for at in range(0, count, BATCH_SIZE)
    ]


def _send_batches(client: httpx.Client, batches: list[dict[str, Any]]) -> None:
    for body in batches:
        response = client.post("/v1/mutations/batch", json=body)
        assert response.status_code == 200, response.text
        assert {item["status"] for item in response.json()["results"]} == {201}


def batch_rate(client: httpx.Client, count: int) -> float:
    batches = _batches(count)
    started = time.perf_counter()
    _send_batches(client, batches)
    return count / (time.perf_counter() - started)


def batch_rate_in_flight(clients: list[httpx.Client], count: int) -> float:
    """`count` mutations in batches, each client keeping one batch in flight."""
    shares = [_batches(count // len(clients)) for _ in clients]
    threads = [
        threading.Thread(target=_send_batches, args=(client, share))
        for client, share in zip(clients, shares, strict=True)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(len(b["mutations"]) for s in shares for b in s) / (time.perf_counter() - started)


def healthz_ms(client: httpx.Client, count: int) -> float:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        response = client.get("/healthz")
        times.append(time.perf_counter() - started)
        assert response.status_code == 200
    return 1000 * statistics.median(times)


def _median(samples: list[float]) -> float:
    return round(statistics.median(samples), 2)


def _single_with_cpu(
    client: httpx.Client, count: int, window: CpuWindow, expect: int = 201
) -> tuple[float, dict[str, float]]:
    """The kept-alive single rate, and CPU µs per mutation of each process group."""
    window.start()
    client_cpu = time.process_time()
    rate = single_rate(client, count, expect)
    client_cpu = time.process_time() - client_cpu
    cpu = window.stop()
    per = {f"{name.removesuffix('_cpu_s')}_us": 1e6 * cpu[name] / count
           for name in cpu if name.endswith("_cpu_s")}  # fmt: skip
    per["client_us"] = 1e6 * client_cpu / count
    per["wall_us"] = 1e6 / rate
    return rate, per


def bench_backend(
    workdir: Path,
    urls: tuple[str, str, str],
    counts: dict[str, int],
    postmaster: int | None = None,
) -> dict[str, Any]:
    """The figures of one backend: `urls` are the server's database, the raw driver's and the
    raw-rows floor's (three databases of the same schema)."""
    db_url, raw_url, floor_url = urls
    runs, single, batch, pings = (counts[n] for n in ("runs", "single", "batch", "pings"))
    token = provision_device(db_url, "bench", "worker")
    samples: dict[str, dict[str, list[float]]] = {
        "single": {"kept_alive": [], "fresh_connection": [], "raw_same_rows": [], "bare_asgi": [],
                   "bare_asgi_h11": [], "bare_asgi_raw_rows": []},
        "batch": {"kept_alive": [], "fresh_connection": [], "two_in_flight": [],
                  "raw_same_rows": [], "bare_asgi_raw_rows": []},
        "healthz_ms": {"kept_alive": [], "fresh_connection": [], "bare_asgi": []},
        "cpu_per_single_us": {},
        "cpu_per_bare_asgi_us": {},
        "cpu_per_bare_asgi_h11_us": {},
        "cpu_per_bare_asgi_raw_rows_us": {},
        # The server's work orders as its kept-alive single and batch runs began; the raw
        # driver and the floor are levelled with them before they are measured.
        "work_orders": {"single": [], "batch": []},
    }  # fmt: skip
    raw = RawWriter(raw_url, FIELDS)
    # Levels the floor's database with the server's (its process writes only the single
    # requests' rows), as `raw` levels its own: see `RawWriter.level_with`.
    floor_rows = RawWriter(floor_url, FIELDS)
    server_rows = open_store(db_url, create=False)
    # Separate processes, as in production: a client in the same interpreter would compete
    # with the server for the GIL and halve both.
    try:
        with (
            ServerProcess(workdir, db_url=db_url, log_level=LOG_LEVEL) as server,
            BareAsgiProcess(workdir, "served") as bare,
            BareAsgiProcess(workdir, "h11") as h11_bare,
            BareAsgiProcess(workdir, "raw", floor_url) as raw_bare,
        ):
            groups = {"server": lambda: {server.pid}}
            if postmaster is not None:
                groups["postgresql"] = lambda: tree(postmaster)
            window = CpuWindow(groups)
            clients = {c: _client(server.base_url, token, c) for c in CONNECTIONS}
            second = _client(server.base_url, token, "kept_alive")
            floors = {
                name: (_client(process.base_url, token, "kept_alive"),
                       CpuWindow({"server": lambda p=process: {p.pid},
                                  **({"postgresql": groups["postgresql"]} if db else {})}))
                for name, process, db in (("bare_asgi", bare, False),
                                          ("bare_asgi_h11", h11_bare, False),
                                          ("bare_asgi_raw_rows", raw_bare, "postgresql" in groups))
            }  # fmt: skip
            floor = floors["bare_asgi"][0]
            try:
                for client in clients.values():
                    single_rate(client, 10)  # warm up caches and code paths
                for client, _ in floors.values():
                    single_rate(client, 10, expect=200)
                for _ in range(runs):
                    for connection, client in clients.items():
                        samples["healthz_ms"][connection].append(healthz_ms(client, pings))
                        if connection == "kept_alive":
                            at_single = work_orders_in(server_rows)
                            rate, cpu = _single_with_cpu(client, single, window)
                            for name, value in cpu.items():
                                samples["cpu_per_single_us"].setdefault(name, []).append(value)
                        else:
                            rate = single_rate(client, single)
                        samples["single"][connection].append(rate)
                        if connection == "kept_alive":
                            at_batch = work_orders_in(server_rows)
                        samples["batch"][connection].append(batch_rate(client, batch))
                    pair = [clients["kept_alive"], second]
                    samples["batch"]["two_in_flight"].append(batch_rate_in_flight(pair, batch))
                    samples["healthz_ms"]["bare_asgi"].append(healthz_ms(floor, pings))
                    floor_rows.level_with(at_single, BATCH_SIZE)
                    for name, (client, floor_window) in floors.items():
                        rate, cpu = _single_with_cpu(client, single, floor_window, 200)
                        samples["single"][name].append(rate)
                        for part, value in cpu.items():
                            samples[f"cpu_per_{name}_us"].setdefault(part, []).append(value)
                    floor_rows.level_with(at_batch, BATCH_SIZE)
                    samples["batch"]["bare_asgi_raw_rows"].append(
                        batch_rate(floors["bare_asgi_raw_rows"][0], batch)
                    )
                    raw.level_with(at_single, BATCH_SIZE)
                    samples["single"]["raw_same_rows"].append(raw.rate(single, 1))
                    raw.level_with(at_batch, BATCH_SIZE)
                    samples["batch"]["raw_same_rows"].append(raw.rate(batch, BATCH_SIZE))
                    samples["work_orders"]["single"].append(at_single)
                    samples["work_orders"]["batch"].append(at_batch)
            finally:
                for client in (*clients.values(), second, *(c for c, _ in floors.values())):
                    client.close()
    finally:
        for store in (raw, floor_rows, server_rows):
            store.close()
    return _figures(samples)


def _paired(over: list[float], under: list[float]) -> float:
    """The median of the runs' own ratios. Each run measures both sides alike (the raw driver
    and the floors levelled with the server's tables as its run began): the ratio of the two
    medians would set one run's server beside another run's baseline, on tables of another
    size (a batch run adds 20,000 rows), and moved by 0.09 between two runs of this bench."""
    return round(statistics.median(a / b for a, b in zip(over, under, strict=True)), 3)


def _figures(samples: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    figures: dict[str, Any] = {
        kind: {name: _median(values) for name, values in by_name.items()}
        for kind, by_name in samples.items()
    }
    single, batch = samples["single"], samples["batch"]
    figures["ratios"] = {
        "single_vs_raw": _paired(single["kept_alive"], single["raw_same_rows"]),
        "batch_vs_raw": _paired(batch["kept_alive"], batch["raw_same_rows"]),
        "batch_vs_single": round(_paired(batch["kept_alive"], single["kept_alive"]), 2),
        "single_vs_bare_asgi": _paired(single["kept_alive"], single["bare_asgi"]),
        "bare_asgi_vs_h11": _paired(single["bare_asgi"], single["bare_asgi_h11"]),
        "bare_asgi_vs_raw": _paired(single["bare_asgi"], single["raw_same_rows"]),
        "bare_asgi_raw_rows_vs_raw": _paired(single["bare_asgi_raw_rows"], single["raw_same_rows"]),
        "single_vs_bare_asgi_raw_rows": _paired(single["kept_alive"], single["bare_asgi_raw_rows"]),
        "batch_bare_asgi_raw_rows_vs_raw": _paired(
            batch["bare_asgi_raw_rows"], batch["raw_same_rows"]
        ),
        "batch_vs_bare_asgi_raw_rows": _paired(batch["kept_alive"], batch["bare_asgi_raw_rows"]),
        "batch_two_in_flight_vs_one": _paired(batch["two_in_flight"], batch["kept_alive"]),
        "single_kept_alive_vs_fresh": _paired(single["kept_alive"], single["fresh_connection"]),
        "batch_kept_alive_vs_fresh": _paired(batch["kept_alive"], batch["fresh_connection"]),
    }
    figures["samples"] = {
        kind: {name: [round(v, 2) for v in values] for name, values in by_name.items()}
        for kind, by_name in samples.items()
    }
    return figures


@contextmanager
def _postgres() -> Iterator[tuple[str, str, str, int] | None]:
    try:
        with running_postgres(durable=True) as cluster:
            yield (
                cluster.create_database("bench"),
                cluster.create_database("bench_raw"),
                cluster.create_database("bench_floor"),
                postmaster_pid(cluster.data),
            )
    except PostgresUnavailable as error:
        print(f"PostgreSQL skipped: {error}", file=sys.stderr)
        yield None


def print_table(results: dict[str, Any]) -> None:
    meta = results["metadata"]
    print(
        f"mutations/s, median of {meta['runs']} runs ({meta['single_mutations']} single, "
        f"{meta['batch_mutations']} batched, {BATCH_SIZE} per batch); server --log-level "
        f"{meta['log_level']}"
    )
    load = meta["load_average_1m"]
    print(f"load average (1 min) {load['start']:.2f} at start, {load['end']:.2f} at end")
    print(f"{'':40}{'sqlite':>12}{'postgresql':>14}")
    backends = [results["backends"].get(db) for db in ("sqlite", "postgresql")]

    def row(label: str, pick: Callable[[dict[str, Any]], float], fmt: str) -> None:
        cells = [f"{format(pick(b), fmt):>12}" if b else f"{'n/a':>12}" for b in backends]
        print(f"{label:40}{cells[0]}  {cells[1]}")

    for kind, names in (
        (
            "single",
            (
                "kept_alive",
                "fresh_connection",
                "raw_same_rows",
                "bare_asgi",
                "bare_asgi_h11",
                "bare_asgi_raw_rows",
            ),
        ),
        (
            "batch",
            (
                "kept_alive",
                "fresh_connection",
                "two_in_flight",
                "raw_same_rows",
                "bare_asgi_raw_rows",
            ),
        ),
    ):
        for name in names:
            row(f"{kind} {name.replace('_', ' ')}", lambda b, k=kind, n=name: b[k][n], ",.0f")
    for name in (*CONNECTIONS, "bare_asgi"):
        row(f"GET /healthz ms, {name.replace('_', ' ')}",
            lambda b, n=name: b["healthz_ms"][n], ".2f")  # fmt: skip
    for what in ("single", "bare_asgi", "bare_asgi_h11", "bare_asgi_raw_rows"):
        for name in ("wall_us", "client_us", "server_us", "postgresql_us"):
            if what not in ("single", "bare_asgi_raw_rows") and name == "postgresql_us":
                continue
            row(f"µs per {what}: {name[:-3]} cpu".replace("wall cpu", "wall"),
                lambda b, n=name, w=what: b[f"cpu_per_{w}_us"].get(n, 0.0), ",.0f")  # fmt: skip
    for ratio in backends[0]["ratios"] if backends[0] else ():
        row(ratio.replace("_", " "), lambda b, r=ratio: b["ratios"][r], ".2f")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts, a few minutes")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    add_json_option(parser, "server_bench")
    parser.add_argument("--runs", type=int, default=None)
    args = parser.parse_args(argv)
    mode = run_mode(args)
    single, batch, pings = {
        "smoke": (10, 2 * BATCH_SIZE, 5),
        "quick": (200, 2_000, 100),
        "full": (1_000, 6_000, 300),
    }[mode]
    counts = {"runs": args.runs or {"smoke": 1, "quick": 3, "full": 7}[mode],
              "single": single, "batch": batch, "pings": pings}  # fmt: skip

    window = RunWindow()
    backends: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="fieldsync-bench-") as scratch:
        workdir = Path(scratch)
        bench, raw, floor = (f"sqlite:///{workdir}/{name}.sqlite3" for name in NAMES)
        backends["sqlite"] = bench_backend(workdir, (bench, raw, floor), counts)
        with _postgres() as pg:
            backends["postgresql"] = None
            if pg:
                backends["postgresql"] = bench_backend(workdir, pg[:3], counts, pg[3])
    results = {
        "backends": backends,
        "metadata": {
            "mode": mode,
            "runs": counts["runs"],
            "statistic": "median; each ratio the median of the runs' own ratios (paired)",
            "single_mutations": single,
            "batch_mutations": batch,
            "batch_size": BATCH_SIZE,
            "healthz_requests": pings,
            "log_level": LOG_LEVEL,
            "server": "separate process (fieldsync-server serve), loopback",
            "server_flags": f"--log-level {LOG_LEVEL} --rate-limit-per-second 0",
            "fresh_connection": "a new TCP connection per request (no keep-alive pool)",
            "two_in_flight": "two kept-alive clients (threads of the bench), one batch each",
            "raw_same_rows": (
                "bare DB-API cursor, same schema, the server's two transactions per mutation "
                "(per 100 for batch): the idempotency claim(s) (INSERT … RETURNING); then the "
                "change numbers as the store takes them (PostgreSQL: shared advisory lock + "
                "pg_current_xact_id(); SQLite: counter row read and advanced), the work "
                "order(s), their creator's scope entry, their change-log row, the claim(s) "
                "marked done with the reply; its database levelled (untimed creates) with "
                "the server's work orders as the server's kept-alive run of the same kind began"
            ),
            "bare_asgi": "an ASGI app answering {'status': 'ok'}, same uvicorn and protocol "
            "(httptools)",
            "bare_asgi_h11": "the same app, uvicorn parsing with h11 instead of httptools",
            "bare_asgi_raw_rows": (
                "the same app writing each request's create as raw_same_rows does (its own "
                "database), in one worker thread: the floor of this stack doing the store's work"
            ),
            "cpu_per_single_us": (
                "CPU µs per kept-alive single mutation: client (the bench process), server "
                "process, PostgreSQL (postmaster and backends); wall = 1e6 / rate"
            ),
            "postgresql": "throwaway cluster, durable settings"
            if backends["postgresql"]
            else "unavailable",
            **window.metadata(),
        },
    }
    publish("server_bench", results, print_table, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
