"""Sync-server throughput: mutations/s through the single and the batch endpoint, beside the
database writing the same rows, and /healthz latency, on kept-alive and on fresh connections.

Runs `fieldsync-server serve` in its own process (`--log-level warning`: no line per request;
rate limit off) on loopback, once on SQLite and once on a throwaway PostgreSQL cluster (durable
settings). Every figure is the median of several runs, interleaved run by run so machine noise
hits every measurement alike:

- single: `POST /v1/mutations`, one create per request, on one kept-alive connection and,
  as the reference, on a fresh connection per request;
- batch: `POST /v1/mutations/batch`, 100 creates per request (the engine's batch), likewise;
- raw (the ceiling): the rows the server writes for those creates, through the bare DB-API
  cursor into a second database of the same schema, committed as the server commits them. Per
  mutation (per 100 for the batch): one transaction inserting the `processing` idempotency
  row(s); then one holding the change counter (`FOR UPDATE` on PostgreSQL) that inserts the
  record(s) with their change-feed `seq` and each one's scope entry (its creator's key, as
  `server.scope.keys.restamp_changed` writes it), marks the idempotency row(s) done with the stored
  response, and advances the counter. No HTTP, no validation, no reads back;
- healthz: `GET /healthz` median round trip, kept-alive and fresh.

    python benchmarks/server_bench.py --quick --json /tmp/server.json
    python benchmarks/server_bench.py --json      # benchmarks/results/server_bench.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
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
from results_file import SMOKE_HELP, RunWindow, add_json_option, publish, run_mode  # noqa: E402

from app.records import validate_create  # noqa: E402
from server.db.store import Store, open_store  # noqa: E402
from server.embedded import provision_device  # noqa: E402
from server.records.batch import RECORD_COLUMNS  # noqa: E402
from server.records.mutations import now_iso, record_columns_json  # noqa: E402
from tests.support.postgres import PostgresUnavailable, running_postgres  # noqa: E402

#: The code these figures depend on: report.py --check fails once it changes after the
#: commit a results file measured (benchmarks/staleness.py).
MEASURES = ("benchmarks/server_bench.py", "benchmarks/bench_server.py", "server/")
BATCH_SIZE = 100
FIELDS = {"title": "Inspect valve", "site": "Depot 4", "notes": "x" * 200}
CONNECTIONS = ("kept_alive", "fresh_connection")


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


def single_rate(client: httpx.Client, count: int) -> float:
    bodies = [_create() for _ in range(count)]
    started = time.perf_counter()
    for body in bodies:
        key = str(uuid.uuid4())
        response = client.post("/v1/mutations", json=body, headers={"Idempotency-Key": key})
        assert response.status_code == 201, response.text
    return count / (time.perf_counter() - started)


def batch_rate(client: httpx.Client, count: int) -> float:
    batches = [
        {"mutations": [_create(str(uuid.uuid4())) for _ in range(min(BATCH_SIZE, count - at))]}
        for at in range(0, count, BATCH_SIZE)
    ]
    started = time.perf_counter()
    for body in batches:
        response = client.post("/v1/mutations/batch", json=body)
        assert response.status_code == 200, response.text
        assert {item["status"] for item in response.json()["results"]} == {201}
    return count / (time.perf_counter() - started)


def healthz_ms(client: httpx.Client, count: int) -> float:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        response = client.get("/healthz")
        times.append(time.perf_counter() - started)
        assert response.status_code == 200
    return 1000 * statistics.median(times)


class RawWriter:
    """The server's writes for `count` creates, `per_commit` per pair of transactions."""

    DEVICE_ID = 1
    #: The bench device's person, who creates every work order (`provision_device`'s default).
    CREATOR = "bench"

    def __init__(self, db_url: str) -> None:
        self.store: Store = open_store(db_url)  # the server's tables, indexes and pragmas
        tables = self.store.tables
        self.keys = f'"{tables.IdempotencyKey._meta.table_name}"'
        self.records = f'"{tables.WorkOrder._meta.table_name}"'
        self.counter = f'"{tables.ChangeCounter._meta.table_name}"'
        self.scope = f'"{tables.ScopeEntry._meta.table_name}"'
        self.fields = validate_create(FIELDS)

    def close(self) -> None:
        self.store.close()

    def rate(self, count: int, per_commit: int) -> float:
        groups = [
            [(str(uuid.uuid4()), str(uuid.uuid4())) for _ in range(min(per_commit, count - at))]
            for at in range(0, count, per_commit)
        ]
        started = time.perf_counter()
        for group in groups:
            self._write(group)
        return count / (time.perf_counter() - started)

    def _write(self, group: list[tuple[str, str]]) -> None:
        db, store, param = self.store.db, self.store, self.store.db.param
        now = time.time()
        token = uuid.uuid4().hex
        claim_columns = '"device_id", "key", "request_hash", "state", "claim_token", ' + (
            '"claimed_at", "created_at"'
        )
        with db.atomic():
            claims: list[Any] = []
            for key, _ in group:
                claims += [self.DEVICE_ID, key, "0" * 64, "processing", token, now, now]
            cursor = db.cursor()
            cursor.execute(
                f"INSERT INTO {self.keys} ({claim_columns}) VALUES "
                f'{store.values_list(len(group), 7)} RETURNING "key", "id"',
                claims,
            )
            row_ids = dict(cursor.fetchall())
        with db.atomic():
            cursor = db.cursor()
            lock = " FOR UPDATE" if store.is_postgres else ""
            cursor.execute(
                f'SELECT "value" FROM {self.counter} WHERE "name" = {param}{lock}', ["changes"]
            )
            seq = int(cursor.fetchone()[0])
            records, done = [], []
            for key, entity_id in group:
                seq += 1
                record = {
                    **self.fields, "id": entity_id, "version": 1, "updated_at": now_iso(),
                    "updated_by": "bench", "seq": seq, "created_by": self.CREATOR,
                }  # fmt: skip
                records.append(record)
                body = json.dumps({"record": record_columns_json(record)})
                done.append((row_ids[key], token, 201, body))
            self._insert_records(cursor, records)
            self._insert_scope_entries(cursor, records)
            self._mark_done(cursor, done)
            cursor.execute(
                f'UPDATE {self.counter} SET "value" = {param} WHERE "name" = {param}',
                [seq, "changes"],
            )

    def _insert_records(self, cursor: Any, records: list[dict[str, Any]]) -> None:
        width = len(RECORD_COLUMNS)
        names = ", ".join(f'"{name}"' for name in RECORD_COLUMNS)
        size = self.store.rows_per_statement(width)
        for at in range(0, len(records), size):
            chunk = records[at : at + size]
            cursor.execute(
                f"INSERT INTO {self.records} ({names}) VALUES "
                f"{self.store.values_list(len(chunk), width)}",
                [record[name] for record in chunk for name in RECORD_COLUMNS],
            )

    def _insert_scope_entries(self, cursor: Any, records: list[dict[str, Any]]) -> None:
        """The scoped feed's row of each new work order: its creator's key (server/scope/)."""
        size = self.store.rows_per_statement(4)
        for at in range(0, len(records), size):
            chunk = records[at : at + size]
            cursor.execute(
                f'INSERT INTO {self.scope} ("key", "entity_id", "seq", "present") VALUES '
                f"{self.store.values_list(len(chunk), 4)}",
                [v for r in chunk for v in (f"u:{self.CREATOR}", r["id"], r["seq"], True)],
            )

    def _mark_done(self, cursor: Any, done: list[tuple[int, str, int, str]]) -> None:
        param = self.store.db.param
        if len(done) == 1:  # the single endpoint's statement
            row_id, token, status, body = done[0]
            cursor.execute(
                f'UPDATE {self.keys} SET "state" = {param}, "status_code" = {param}, '
                f'"response_body" = {param} WHERE "id" = {param} AND "claim_token" = {param} '
                f'AND "state" = {param}',
                ["done", status, body, row_id, token, "processing"],
            )
            return
        columns = ("id", "claim_token", "status_code", "response_body")
        size = self.store.rows_per_statement(len(columns))
        for at in range(0, len(done), size):
            chunk = done[at : at + size]
            cursor.execute(
                f'UPDATE {self.keys} SET "state" = {param}, "status_code" = v."status_code", '
                f'"response_body" = v."response_body" FROM '
                f"{self.store.values_table(columns, len(chunk))} AS v "
                f'WHERE {self.keys}."id" = v."id" AND {self.keys}."claim_token" = v."claim_token"'
                f' AND {self.keys}."state" = {param}',
                ["done", *(value for row in chunk for value in row), "processing"],
            )


def _median(samples: list[float]) -> float:
    return round(statistics.median(samples), 2)


def bench_backend(
    workdir: Path, db_url: str, raw_url: str, runs: int, single: int, batch: int, pings: int
) -> dict[str, Any]:
    token = provision_device(db_url, "bench", "worker")
    samples: dict[str, dict[str, list[float]]] = {
        "single": {"kept_alive": [], "fresh_connection": [], "raw_same_rows": []},
        "batch": {"kept_alive": [], "fresh_connection": [], "raw_same_rows": []},
        "healthz_ms": {"kept_alive": [], "fresh_connection": []},
    }
    raw = RawWriter(raw_url)
    # A separate process, as in production: a client in the same interpreter would compete
    # with the server for the GIL and halve both.
    try:
        with ServerProcess(workdir, db_url=db_url) as server:
            clients = {c: _client(server.base_url, token, c) for c in CONNECTIONS}
            try:
                for client in clients.values():
                    single_rate(client, 10)  # warm up caches and code paths
                for _ in range(runs):
                    for connection, client in clients.items():
                        samples["healthz_ms"][connection].append(healthz_ms(client, pings))
                        samples["single"][connection].append(single_rate(client, single))
                        samples["batch"][connection].append(batch_rate(client, batch))
                    samples["single"]["raw_same_rows"].append(raw.rate(single, 1))
                    samples["batch"]["raw_same_rows"].append(raw.rate(batch, BATCH_SIZE))
            finally:
                for client in clients.values():
                    client.close()
    finally:
        raw.close()
    figures: dict[str, Any] = {
        kind: {name: _median(values) for name, values in by_name.items()}
        for kind, by_name in samples.items()
    }
    single_fig, batch_fig = figures["single"], figures["batch"]
    figures["ratios"] = {
        "single_vs_raw": round(single_fig["kept_alive"] / single_fig["raw_same_rows"], 3),
        "batch_vs_raw": round(batch_fig["kept_alive"] / batch_fig["raw_same_rows"], 3),
        "batch_vs_single": round(batch_fig["kept_alive"] / single_fig["kept_alive"], 2),
        "single_kept_alive_vs_fresh": round(
            single_fig["kept_alive"] / single_fig["fresh_connection"], 3
        ),
        "batch_kept_alive_vs_fresh": round(
            batch_fig["kept_alive"] / batch_fig["fresh_connection"], 3
        ),
    }
    figures["samples"] = {
        kind: {name: [round(v, 2) for v in values] for name, values in by_name.items()}
        for kind, by_name in samples.items()
    }
    return figures


@contextmanager
def _postgres_urls() -> Iterator[tuple[str, str] | None]:
    try:
        with running_postgres(durable=True) as cluster:
            yield cluster.create_database("bench"), cluster.create_database("bench_raw")
    except PostgresUnavailable as error:
        print(f"PostgreSQL skipped: {error}", file=sys.stderr)
        yield None


def print_table(results: dict[str, Any]) -> None:
    meta = results["metadata"]
    print(
        f"mutations/s, median of {meta['runs']} runs ({meta['single_mutations']} single, "
        f"{meta['batch_mutations']} batched, {BATCH_SIZE} per batch); server --log-level warning"
    )
    load = meta["load_average_1m"]
    print(f"load average (1 min) {load['start']:.2f} at start, {load['end']:.2f} at end")
    print(f"{'':34}{'sqlite':>12}{'postgresql':>14}")
    backends = [results["backends"].get(db) for db in ("sqlite", "postgresql")]

    def row(label: str, pick: Callable[[dict[str, Any]], float], fmt: str) -> None:
        cells = [f"{format(pick(b), fmt):>12}" if b else f"{'n/a':>12}" for b in backends]
        print(f"{label:34}{cells[0]}  {cells[1]}")

    for kind in ("single", "batch"):
        for name in ("kept_alive", "fresh_connection", "raw_same_rows"):
            row(f"{kind} {name.replace('_', ' ')}", lambda b, k=kind, n=name: b[k][n], ",.0f")
    for name in CONNECTIONS:
        row(
            f"GET /healthz ms, {name.replace('_', ' ')}",
            lambda b, n=name: b["healthz_ms"][n],
            ".2f",
        )
    for ratio in ("single_vs_raw", "batch_vs_raw", "batch_vs_single", "single_kept_alive_vs_fresh"):
        row(ratio.replace("_", " "), lambda b, r=ratio: b["ratios"][r], ".2f")
    for db, backend in zip(("sqlite", "postgresql"), backends, strict=True):
        if backend:
            ratio = backend["ratios"]["batch_vs_single"]
            print(f"batch/single on {db}: {ratio:.1f}x (target >= 5x)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts, a few minutes")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    add_json_option(parser, "server_bench")
    parser.add_argument("--runs", type=int, default=None)
    args = parser.parse_args(argv)
    mode = run_mode(args)
    runs = args.runs or {"smoke": 1, "quick": 3, "full": 5}[mode]
    single, batch, pings = {
        "smoke": (10, 2 * BATCH_SIZE, 5),
        "quick": (200, 2_000, 100),
        "full": (1_000, 10_000, 300),
    }[mode]

    window = RunWindow()
    backends: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="fieldsync-bench-") as scratch:
        workdir = Path(scratch)
        backends["sqlite"] = bench_backend(
            workdir, f"sqlite:///{workdir}/bench.sqlite3", f"sqlite:///{workdir}/raw.sqlite3",
            runs, single, batch, pings,
        )  # fmt: skip
        with _postgres_urls() as pg_urls:
            backends["postgresql"] = (
                bench_backend(workdir, *pg_urls, runs, single, batch, pings) if pg_urls else None
            )
    results = {
        "backends": backends,
        "metadata": {
            "mode": mode,
            "runs": runs,
            "statistic": "median",
            "single_mutations": single,
            "batch_mutations": batch,
            "batch_size": BATCH_SIZE,
            "healthz_requests": pings,
            "server": "separate process (fieldsync-server serve), loopback",
            "server_flags": "--log-level warning --rate-limit-per-second 0",
            "fresh_connection": "a new TCP connection per request (no keep-alive pool)",
            "raw_same_rows": (
                "bare DB-API cursor, same schema; per mutation (per 100 for batch): one "
                "transaction inserting the idempotency claim(s), one with the counter lock "
                "inserting the record(s) and their creator's scope entry, marking the "
                "claim(s) done with the response, advancing the counter"
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
