"""Search benchmark: the first page of `GET /v1/records?q=` through its index beside the LIKE
scan it replaced, at two table sizes, on SQLite and PostgreSQL, in one run.

    .venv/bin/python benchmarks/search_bench.py --quick --json /tmp/search.json
    .venv/bin/python benchmarks/search_bench.py --json   # benchmarks/results/search_bench.json

Each size is a server database seeded in bulk by `seed.py` (the scope benchmark's population:
work order i is titled "Work order i", site "Depot", assigned to one of 2,000 users) with
10,000 and 1,000,000 work orders (quick: 1,000 and 10,000). The query is the server's own
(`server.records.search.find_work_orders`, a page of 50 plus one to know whether more follow, over
the whole organisation), called on the server's store: with the index (SQLite: the FTS5
trigram table; PostgreSQL: pg_trgm GIN indexes) and as the plain LIKE scan (`indexed=False`:
on PostgreSQL the same query with bitmap scans off, which GIN indexes need), alternating, on
the same database. Terms, from rare to common:

- `absent`: text no work order has (the LIKE scan reads the whole table);
- `rare`: "order 4321" (1 work order at 10,000; 111 at 1,000,000);
- `one user`: "user-0042", the assignee of one work order in 2,000;
- `common`: "Work order", every title (the scan's first rows fill the page).

Each figure is p50 / p99 of the query's wall time in ms; the ratio is scan p50 / index p50.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_file import SMOKE_HELP, RunWindow, add_json_option, publish, run_mode  # noqa: E402
from seed import Population, seed_work_orders  # noqa: E402

from server.db.store import Store, open_store  # noqa: E402
from server.records.search import find_work_orders  # noqa: E402
from tests.support.postgres import PostgresUnavailable, running_postgres  # noqa: E402

#: The code these figures depend on: report.py --check fails once it changes after the
#: commit a results file measured (benchmarks/staleness.py).
MEASURES = ("benchmarks/search_bench.py", "benchmarks/seed.py", "server/")
PAGE = 50
TERMS = {
    "absent": "no such text",
    "rare": "order 4321",
    "one user": "user-0042",
    "common": "Work order",
}


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return (time.perf_counter() - start) * 1000, result


def measure_term(store: Store, text: str, queries: int) -> dict[str, Any]:
    """p50/p99 of the indexed query and of the scan, interleaved; both must agree."""
    times: dict[str, list[float]] = {"index": [], "scan": []}
    found = 0
    for _ in range(queries):
        for kind in times:
            ms, rows = _timed(
                lambda kind=kind: find_work_orders(
                    store, text, "", PAGE + 1, indexed=kind == "index"
                )
            )
            times[kind].append(ms)
            if kind == "index":
                indexed_ids = [row["id"] for row in rows]
            elif [row["id"] for row in rows] != indexed_ids:
                raise AssertionError(f"index and scan disagree on {text!r}")
            found = len(rows)
    figures: dict[str, Any] = {"matches_on_page": min(found, PAGE)}
    for kind, samples in times.items():
        figures[kind] = {
            "p50_ms": round(statistics.median(samples), 2),
            "p99_ms": round(_percentile(samples, 0.99), 2),
        }
    figures["scan_vs_index_p50"] = round(figures["scan"]["p50_ms"] / figures["index"]["p50_ms"], 1)
    return figures


def measure_size(db_url: str, size: int, queries: int) -> dict[str, Any]:
    start = time.perf_counter()
    seed_work_orders(db_url, Population(work_orders=size))
    seeded_s = time.perf_counter() - start
    store = open_store(db_url)
    try:
        with store.db.connection_context():
            terms = {name: measure_term(store, text, queries) for name, text in TERMS.items()}
    finally:
        store.close()
    return {"seed_rows_per_s": round(size / seeded_s), "terms": terms}


@contextmanager
def _databases(backend: str, root: Path) -> Iterator[Callable[[str], str]]:
    if backend == "sqlite":
        yield lambda name: f"sqlite:///{root / name}.sqlite3"
        return
    with running_postgres() as cluster:
        yield cluster.create_database


def print_table(results: dict[str, Any]) -> None:
    for backend, figures in results["backends"].items():
        for size, at in figures.items():
            print(f"\n{backend}, {int(size):,} work orders (p50 / p99 ms)")
            print(f"{'term':<10} {'index':>18} {'LIKE scan':>18} {'scan/index':>11}")
            for name, term in at["terms"].items():
                index, scan = term["index"], term["scan"]
                print(
                    f"{name:<10} {index['p50_ms']:>8} / {index['p99_ms']:<8}"
                    f"{scan['p50_ms']:>8} / {scan['p99_ms']:<8} {term['scan_vs_index_p50']:>9}x"
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 and 10,000 work orders")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    add_json_option(parser, "search_bench")
    args = parser.parse_args(argv)
    mode = run_mode(args)
    sizes, counts = {
        "smoke": ((500, 1_000), (3, 3)),
        "quick": ((1_000, 10_000), (60, 30)),
        "full": ((10_000, 1_000_000), (60, 20)),
    }[mode]
    queries = dict(zip(sizes, counts, strict=True))
    backends = ("sqlite", "postgresql") if args.backend == "both" else (args.backend,)
    results: dict[str, Any] = {"metadata": {"mode": mode, "quick": mode != "full",
                                            "sizes": sizes, "page": PAGE, "terms": TERMS,
                                            "queries": queries}}  # fmt: skip
    results["backends"] = {}
    window = RunWindow()
    with tempfile.TemporaryDirectory(prefix="search-bench-") as tmp:
        for backend in backends:
            try:
                with _databases(backend, Path(tmp)) as database:
                    results["backends"][backend] = {
                        str(size): measure_size(database(f"search_{size}"), size, queries[size])
                        for size in sizes
                    }
            except PostgresUnavailable as error:
                print(f"{backend}: not measured ({error})", file=sys.stderr)
    results["metadata"].update(window.metadata())
    publish("search_bench", results, print_table, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
