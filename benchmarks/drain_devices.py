"""Several devices in one process, each with offline edits, draining at once on a signal.

    python benchmarks/drain_devices.py --root DIR --devices devices.json --server URL --edits N

`devices.json` is a list of `{"name", "token", "user", "team"}`. Each device gets its own data
dir under DIR and N offline creates of work orders in its own scope (assignee = its user, team
= its team), imported before the clock starts. It prints `{"event": "ready"}`, waits for a line
on stdin, then runs every device's real `SyncEngine` concurrently (one asyncio loop, each
engine with its own store and single-writer executor) until each has delivered everything,
and prints `{"event": "done", "devices": [{"name", "edits", "done", "started", "finished"}]}`
with `time.time()` stamps (the parent compares processes by wall clock).

`scope_bench.py` starts several of these so that 50 devices are spread over a few processes
and cores, as 50 phones would be over 50.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_device import engine_config, run_child, say  # noqa: E402

from app.events import EventBus  # noqa: E402
from app.records import EDITABLE_FIELDS  # noqa: E402
from app.store.store import Store  # noqa: E402
from app.sync.engine import SyncEngine  # noqa: E402

DRAIN_LIMIT_S = 1800.0


def creates(device: dict[str, str], count: int) -> list[dict[str, Any]]:
    rows = []
    for index in range(count):
        fields: dict[str, Any] = {
            "title": f"{device['name']} job {index}",
            "site": "Depot 4, bay 2",
            "notes": "Leaks at 3 bar.",
            "assignee": device["user"],
        }
        if "team" in EDITABLE_FIELDS:
            fields["team"] = device["team"]
        rows.append(fields)
    return rows


async def drain(store: Store, device: dict[str, str], server: str, edits: int) -> dict[str, Any]:
    token = device["token"]
    engine = SyncEngine(store, engine_config(server), EventBus(), token=lambda: token)
    started = time.time()
    idle = await engine.run_until_idle(DRAIN_LIMIT_S)
    engine.executor.shutdown()
    done, last = store.db.execute_sql(
        "SELECT COUNT(*), MAX(finished_at) FROM jobs WHERE status = 'done'"
    ).fetchone()
    if not idle or done != edits:
        raise RuntimeError(f"{device['name']}: {done} of {edits} delivered (idle: {idle})")
    return {"name": device["name"], "edits": edits, "done": done, "started": started,
            "finished": last}  # fmt: skip


async def main_async(args: argparse.Namespace, devices: list[dict[str, str]]) -> int:
    root = Path(args.root)
    stores = []
    try:
        for device in devices:
            data_dir = root / device["name"]
            data_dir.mkdir(parents=True, exist_ok=True)
            store = Store(data_dir)
            stores.append(store)
            store.import_records(creates(device, args.edits))
        say("ready", devices=len(devices))
        await asyncio.to_thread(sys.stdin.readline)
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(drain(store, device, args.server, args.edits))
                for store, device in zip(stores, devices, strict=True)
            ]
        say("done", devices=[task.result() for task in tasks])
        return 0
    finally:
        for store in stores:
            store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--devices", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--edits", type=int, required=True)
    args = parser.parse_args()
    devices: list[dict[str, str]] = json.loads(Path(args.devices).read_text())
    return run_child(lambda: main_async(args, devices))


if __name__ == "__main__":
    sys.exit(main())
