"""Console benchmark: the fleet page over many devices, and the work-order search in the
console beside the same search through `GET /v1/records?q=`, on SQLite.

    .venv/bin/python benchmarks/console_bench.py --quick --json /tmp/console.json
    .venv/bin/python benchmarks/console_bench.py --json   # benchmarks/results/console_bench.json

A server database gets `devices` devices, each with a status report (server/devices/status.py),
and `work orders` work orders seeded in bulk by `seed.py` (the search benchmark's population).
The app (`server.app.create_app`) answers in-process through Starlette's TestClient, signed in
to the console as an admin and, for `/v1/`, as an admin device; each figure is the request's
wall time there (the server's work plus the in-process client's small share), p50 / p95 in
ms. The fleet page shows its first 200 devices, sorted by last sync over all of them; its
query alone (`server.console.fleet.fleet_rows`) is timed beside it, so the rendering's share
shows. Full: 10,000 devices and 1,000,000 work orders; `--work-orders`
sets another count (the seed writes about 1,300 rows/s on SQLite).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_file import SMOKE_HELP, RunWindow, add_json_option, publish, run_mode  # noqa: E402
from seed import Population, seed_work_orders  # noqa: E402

with warnings.catch_warnings():
    # WORKAROUND: Starlette 1.x warns that its TestClient will move off httpx; the benchmark
    # only needs it to answer in-process, which it still does.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from server.app import create_app  # noqa: E402
from server.auth import add_device, hash_token  # noqa: E402
from server.console.fleet import fleet_rows  # noqa: E402
from server.console.models import console_tables  # noqa: E402
from server.console.users import add_user  # noqa: E402
from server.db.store import Store, open_store  # noqa: E402
from server.settings import Settings  # noqa: E402

#: The code these figures depend on (benchmarks/staleness.py): the console, the device status
#: it lists, the search both doors use and the store. Not all of server/: an upload lock or a
#: tus rule does not move these figures, and every such change would mark them stale.
MEASURES = (
    "benchmarks/console_bench.py",
    "benchmarks/seed.py",
    "server/console/",
    "server/devices/",
    "server/records/search.py",
    "server/routes/search.py",
    "server/db/",
)
TERMS = {"rare": "order 4321", "common": "Work order"}
_PASSWORD = "bench password"
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _figures(samples: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(samples), 2),
            "p95_ms": round(_percentile(samples, 0.95), 2)}  # fmt: skip


def _timed(call: Callable[[], Any], times: int) -> list[float]:
    samples = []
    for _ in range(times):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def seed_devices(store: Store, count: int, now: float) -> None:
    """`count` workers, each with a status report; some behind, some never synced."""
    devices, status = store.tables.Device, store.tables.DeviceStatus
    stamp = "2026-01-01T00:00:00Z"
    with store.db.atomic():
        for start in range(0, count, 500):
            chunk = range(start, min(start + 500, count))
            devices.insert_many(
                [{"name": f"phone-{n:05d}", "role": "worker", "token_hash": hash_token(f"t{n}"),
                  "created_at": stamp, "user_name": f"user-{n % 2000:04d}",
                  "team": f"team-{n % 50:02d}"} for n in chunk]
            ).execute()  # fmt: skip
        ids = [
            row.id for row in devices.select(devices.id).where(devices.name.startswith("phone-"))
        ]
        for start in range(0, len(ids), 500):
            status.insert_many(
                [{"device_id": device_id, "last_seen_at": now - (device_id % 11) * 86_400,
                  "last_sync_at": None if device_id % 13 == 0 else now - (device_id % 9) * 86_400,
                  "reported_at": now, "app_version": "0.1.0", "edits_waiting": device_id % 7,
                  "oldest_edit_since": now - 3600, "failed_changes": device_id % 3,
                  "uploads_waiting": device_id % 2, "failed": "[]"}
                 for device_id in ids[start:start + 500]]
            ).execute()  # fmt: skip


def _signed_in(client: TestClient) -> None:
    form = client.get("/console/login")
    token = _CSRF.search(form.text)
    assert token, "no sign-in form"
    reply = client.post(
        "/console/login",
        data={"username": "bench", "password": _PASSWORD, "csrf_token": token.group(1)},
        follow_redirects=False,
    )
    assert reply.status_code == 303, reply.text


def measure(root: Path, devices: int, work_orders: int, queries: int) -> dict[str, Any]:
    db_url = f"sqlite:///{root / 'console.sqlite3'}"
    started = time.perf_counter()
    seed_work_orders(db_url, Population(work_orders=work_orders))
    store = open_store(db_url)
    now = time.time()
    try:
        seed_devices(store, devices, now)
        add_user(console_tables(store), "bench", "admin", _PASSWORD)
        token = add_device(store, "bench-admin", "admin")
    finally:
        store.close()
    seeded_s = time.perf_counter() - started
    app = create_app(Settings(db_url=db_url, rate_limit_per_second=0))
    results: dict[str, Any] = {"seed_s": round(seeded_s, 1)}
    with TestClient(app) as client:
        _signed_in(client)
        api = {"Authorization": f"Bearer {token}"}

        def fleet() -> None:
            reply = client.get("/console/devices?sort=sync&order=asc")
            assert reply.status_code == 200
            assert f"{devices + 1} active devices" in reply.text  # and the admin device

        context = app.state.console
        results["fleet"] = {
            "page": _figures(_timed(fleet, queries)),
            "query": _figures(_timed(lambda: fleet_rows(context.store), queries)),
        }
        results["search"] = {}
        for name, text in TERMS.items():

            def console_search(text: str = text) -> None:
                assert client.get("/console/work-orders", params={"q": text}).status_code == 200

            def api_search(text: str = text) -> None:
                reply = client.get("/v1/records", params={"q": text, "limit": 50}, headers=api)
                assert reply.status_code == 200

            samples: dict[str, list[float]] = {"console": [], "api": []}
            for _ in range(queries):  # interleaved, so load changes touch both alike
                samples["console"] += _timed(console_search, 1)
                samples["api"] += _timed(api_search, 1)
            results["search"][name] = {kind: _figures(s) for kind, s in samples.items()}
    return results


def print_table(results: dict[str, Any]) -> None:
    meta, figures = results["metadata"], results["figures"]
    print(f"\n{meta['devices']:,} devices, {meta['work_orders']:,} work orders (p50 / p95 ms)")
    fleet = figures["fleet"]
    print(f"fleet page      {fleet['page']['p50_ms']:>9} / {fleet['page']['p95_ms']}")
    print(f"fleet query     {fleet['query']['p50_ms']:>9} / {fleet['query']['p95_ms']}")
    for name, term in figures["search"].items():
        console, api = term["console"], term["api"]
        print(f"search {name:<8} console {console['p50_ms']} / {console['p95_ms']}"
              f"   /v1/ {api['p50_ms']} / {api['p95_ms']}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 devices, 10,000 work orders")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--work-orders", type=int, default=None, help="instead of the mode's")
    add_json_option(parser, "console_bench")
    args = parser.parse_args(argv)
    mode = run_mode(args)
    devices, work_orders, queries = {
        "smoke": (50, 500, 3),
        "quick": (1_000, 10_000, 20),
        "full": (10_000, 1_000_000, 20),
    }[mode]
    work_orders = args.work_orders or work_orders
    window = RunWindow()
    with tempfile.TemporaryDirectory(prefix="console-bench-") as tmp:
        figures = measure(Path(tmp), devices, work_orders, queries)
    results: dict[str, Any] = {
        "metadata": {"mode": mode, "quick": mode != "full", "devices": devices,
                     "work_orders": work_orders, "queries": queries, "terms": TERMS,
                     "backend": "sqlite", **window.metadata()},
        "figures": figures,
    }  # fmt: skip
    publish("console_bench", results, print_table, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
