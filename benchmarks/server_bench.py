"""Sync-server throughput: mutations/s through the single and the batch endpoint.

Runs `fieldsync-server serve` on loopback (rate limit off), once on SQLite and once on a
throwaway PostgreSQL cluster (default, durable settings), and reports the median of several
runs beside the raw insert rate of the same database: rows of the work-order table inserted
one statement each, in one transaction, through the bare DB-API driver. That is the ceiling a
server that writes every mutation could approach, before idempotency, version checks and HTTP.

    python benchmarks/server_bench.py --quick --json bench-results/server.json
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

from server.database import open_store  # noqa: E402
from server.embedded import provision_device  # noqa: E402
from tests.support.postgres import PostgresUnavailable, running_postgres  # noqa: E402
from tests.support.serve import ServerProcess  # noqa: E402

BATCH_SIZE = 500


def _mutation(key: str) -> dict[str, Any]:
    return {
        "idempotency_key": key,
        "entity_id": str(uuid.uuid4()),
        "op": "create",
        "base_version": None,
        "fields": {"title": "Inspect valve", "site": "Depot 4", "notes": "x" * 200},
    }


def _single_rate(client: httpx.Client, count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        body = _mutation("")
        key = body.pop("idempotency_key") or str(uuid.uuid4())
        response = client.post("/v1/mutations", json=body, headers={"Idempotency-Key": key})
        assert response.status_code == 201, response.text
    return count / (time.perf_counter() - started)


def _batch_rate(client: httpx.Client, count: int) -> float:
    started = time.perf_counter()
    for start in range(0, count, BATCH_SIZE):
        size = min(BATCH_SIZE, count - start)
        items = [_mutation(str(uuid.uuid4())) for _ in range(size)]
        response = client.post("/v1/mutations/batch", json={"mutations": items})
        assert response.status_code == 200, response.text
    return count / (time.perf_counter() - started)


def _raw_insert_rate(db_url: str, count: int) -> float:
    store = open_store(db_url)
    db = store.db
    placeholder = "%s" if store.is_postgres else "?"
    db.execute_sql(
        "CREATE TABLE IF NOT EXISTS raw_bench (id VARCHAR(36) PRIMARY KEY, title VARCHAR(200),"
        " site VARCHAR(200), notes TEXT, version INTEGER)"
    )
    sql = f"INSERT INTO raw_bench VALUES ({', '.join([placeholder] * 5)})"
    started = time.perf_counter()
    with db.atomic():
        for _ in range(count):
            db.execute_sql(sql, (str(uuid.uuid4()), "Inspect valve", "Depot 4", "x" * 200, 1))
    rate = count / (time.perf_counter() - started)
    store.close()
    return rate


def _median(runs: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(runs))


def bench_backend(db_url: str, runs: int, single: int, batch: int) -> dict[str, float]:
    token = provision_device(db_url, "bench", "worker")
    # A separate process, as in production: a client in the same interpreter would compete
    # with the server for the GIL and halve both.
    with ServerProcess(db_url, "--rate-limit-per-second", "0") as server:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=120) as client:
            _single_rate(client, 20)  # warm up connections and caches
            return {
                "single": _median(runs, lambda: _single_rate(client, single)),
                "batch": _median(runs, lambda: _batch_rate(client, batch)),
                "raw_insert": _median(runs, lambda: _raw_insert_rate(db_url, batch)),
            }


@contextmanager
def _postgres_url() -> Iterator[str | None]:
    try:
        with running_postgres(durable=True) as cluster:
            yield cluster.create_database("bench")
    except PostgresUnavailable as error:
        print(f"PostgreSQL skipped: {error}", file=sys.stderr)
        yield None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts, under a minute")
    parser.add_argument("--json", type=Path, help="write the medians here")
    parser.add_argument("--runs", type=int, default=None)
    args = parser.parse_args(argv)
    runs = args.runs or (3 if args.quick else 5)
    single, batch = (200, 2_000) if args.quick else (1_000, 10_000)

    results: dict[str, dict[str, float | None]] = {
        "single": {}, "batch": {}, "raw_insert": {},
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="fieldsync-bench-") as scratch:
        measured = bench_backend(f"sqlite:///{scratch}/bench.sqlite3", runs, single, batch)
        for kind, rate in measured.items():
            results[kind]["sqlite"] = rate
    with _postgres_url() as pg_url:
        pg = bench_backend(pg_url, runs, single, batch) if pg_url else {}
    for kind in results:
        results[kind]["postgresql"] = pg.get(kind)

    print(
        f"mutations/s, median of {runs} runs ({single} single, {batch} batched, batch={BATCH_SIZE})"
    )
    print(f"{'':12}{'sqlite':>12}{'postgresql':>14}")
    for kind, row in results.items():
        cells = [
            f"{row[db]:>12.0f}" if row[db] else f"{'n/a':>12}" for db in ("sqlite", "postgresql")
        ]
        print(f"{kind:12}{cells[0]}  {cells[1]}")
    for db in ("sqlite", "postgresql"):
        single_rate, batch_rate = results["single"][db], results["batch"][db]
        if single_rate and batch_rate:
            print(f"batch/single on {db}: {batch_rate / single_rate:.1f}x (target >= 5x)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
