"""One simulated device for the many-device chaos run: edits from a plan, syncs as it goes.

    FIELDSYNC_TOKEN=… python -m tests.chaos.device_runner --data-dir D --server URL \
        --plan plan.json --seed N

Runs the real store and sync engine (as `fieldsync worker` does) with fast backoff and short
timeouts so a chaos run takes seconds, makes the plan's edits one by one while the engine
delivers, and exits 0 once every edit is made and nothing can move any more (nothing leased, nothing
pending except edits waiting behind a conflict for a person). `--final` makes no edits and
stops after one full pull. It may be
SIGKILLed at any instant and started again: progress is recovered from the database itself
(one local edit = one job row) and an append-only intent log (`intents.log` in the data dir):

    begin <i> <jobs>        about to make edit i, with that many job rows before it
    done <i> <job id>       edit i is durable as that job
    rejected <i> <reason>   the device itself refused edit i (e.g. the record is deleted)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import random
import sqlite3
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from app.store.backoff import BackoffPolicy
from app.store.db import connection
from app.store.errors import InvalidEditError
from app.store.queue import QueueConfig
from app.store.store import Store
from app.sync.connectivity import ConnectivityConfig
from app.sync.engine import SyncConfig, SyncEngine
from app.sync.transport import TransportConfig

INTENT_LOG = "intents.log"

# Backoff 150 times faster than the default (cap 2 s, not 300 s), so the attempt budget is
# larger: 12 attempts span about 25 minutes at the default but 17 s here, less than the
# make-chaos server-kill run (16 restarts), where a transient fault must not kill an edit.
QUEUE = QueueConfig(
    lease_seconds=6.0, max_attempts=40, backoff=BackoffPolicy(initial=0.1, base=2.0, cap=2.0)
)


def sync_config(server: str, rng: random.Random, batch_size: int | None = None) -> SyncConfig:
    return SyncConfig(
        server_url=server,
        batch_size=batch_size or rng.choice((1, 3, 10)),
        request_rate=50.0,
        request_burst=20.0,
        reconnect_jitter_s=0.3,
        pull_interval_s=3.0,
        sweep_interval_s=1.0,
        lock_retry_s=0.5,
        transport=TransportConfig(
            connect_timeout=2.0, read_timeout=3.0, write_timeout=3.0, pool_timeout=3.0
        ),
        connectivity=ConnectivityConfig(
            probe_backoff=BackoffPolicy(initial=0.2, base=2.0, cap=1.5, jitter=0.5)
        ),
    )


_DELIVERABLE = """
SELECT COUNT(*) FROM jobs AS j
WHERE j.status = 'leased' OR (j.status = 'pending' AND NOT EXISTS (
    SELECT 1 FROM jobs AS e WHERE e.entity_key = j.entity_key AND e.id < j.id
      AND e.status IN ('conflict', 'dead')))
"""


def deliverable(store: Store) -> int:
    """Jobs that can still move without a person: leased, or pending and not waiting behind a
    conflicted or dead job of the same work order (those wait for the person, by design)."""
    return int(connection(store.db).execute(_DELIVERABLE).fetchone()[0])


def reconciles(store: Store) -> int:
    row = (
        connection(store.db)
        .execute("SELECT value FROM counters WHERE name = 'reconciles'")
        .fetchone()
    )
    return 0 if row is None else int(row[0])


def read_log(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split(" ", 2) for line in path.read_text().splitlines() if line.strip()]


def job_count(db_path: Path) -> int:
    if not db_path.exists():
        return 0
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def resume_index(log: list[list[str]], jobs: int, append: Any) -> int:
    """The next plan index; settles an edit killed between its commit and its log line.

    The edit was made if its job row is there: one more row than the `begin` line counted. The
    rows are counted, not the edits logged, since a device may hold jobs that are not the plan's
    (the shared records' creates of the test's setup)."""
    finished = {int(entry[1]) for entry in log if entry[0] in ("done", "rejected")}
    if log and log[-1][0] == "begin" and int(log[-1][1]) not in finished:
        pending, before = int(log[-1][1]), int(log[-1][2])
        if jobs == before + 1:
            append(f"done {pending} recovered")
            return pending + 1
        return pending
    return max(finished, default=-1) + 1


async def make_edit(engine: SyncEngine, store: Store, edit: dict[str, Any]) -> str:
    def apply() -> str:
        try:
            result = store.record_edit(edit["op"], edit["id"], edit.get("fields"))
        except InvalidEditError as exc:
            return f"rejected {exc}"
        return f"done {result.job_id}"

    outcome = await engine.executor.run(apply)
    engine.wake()
    return outcome


@contextlib.asynccontextmanager
async def running(engine: SyncEngine) -> AsyncIterator[asyncio.Task[None]]:
    """The engine running in a task; stopped (leases released) and awaited on the way out."""
    runner = asyncio.create_task(engine.run())
    try:
        yield runner
    finally:
        await engine.stop()
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner


async def wait_until(
    runner: asyncio.Task[None],
    finished: Callable[[], Awaitable[bool]],
    limit_s: float,
    poll_s: float,
) -> bool:
    """Poll `finished()` until it says so (True), or until the engine's task ended (its error
    raised, else False); TimeoutError after `limit_s`."""
    async with asyncio.timeout(limit_s):
        while not await finished():
            if runner.done():
                runner.result()
                return False
            await asyncio.sleep(poll_s)
    return True


async def main_async(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir)
    rng = random.Random(args.seed)
    plan: list[dict[str, Any]] = json.loads(Path(args.plan).read_text())  # noqa: ASYNC240 - before the loop has work
    log_path = data_dir / INTENT_LOG
    with log_path.open("a", encoding="utf-8") as log_file:

        def append(line: str) -> None:
            log_file.write(line + "\n")
            log_file.flush()

        queue = dataclasses.replace(QUEUE, lease_seconds=args.lease_seconds)
        with Store(data_dir, queue_config=queue) as store:
            token = os.environ["FIELDSYNC_TOKEN"]
            config = sync_config(args.server, rng, args.batch_size)
            engine = SyncEngine(store, config, token=lambda: token, rng=rng)
            start = resume_index(read_log(log_path), job_count(store.path), append)
            if args.final:
                start = len(plan)
            pulls_before = await engine.executor.run(reconciles, store)
            async with running(engine) as runner:
                print(f"runner: start at edit {start} of {len(plan)}", flush=True)
                for index in range(start, len(plan)):
                    await asyncio.sleep(rng.uniform(0.0, args.pace))
                    before = await engine.executor.run(job_count, store.path)
                    append(f"begin {index} {before}")
                    outcome = await make_edit(engine, store, plan[index])
                    word, _, rest = outcome.partition(" ")
                    append(f"{word} {index} {rest.replace(chr(10), ' ')}")

                async def settled() -> bool:
                    left = await engine.executor.run(deliverable, store)
                    pulls = await engine.executor.run(reconciles, store)
                    return left == 0 and (pulls > pulls_before or not args.final)

                if not await wait_until(runner, settled, args.timeout, 0.2):
                    return 1
    print("runner: idle", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--plan", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--pace", type=float, default=0.2, help="max pause between edits (s)")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--final", action="store_true", help="no edits: deliver, pull, stop")
    parser.add_argument("--batch-size", type=int, default=None, help="default: seeded choice")
    parser.add_argument(
        "--lease-seconds", type=float, default=QUEUE.lease_seconds,
        help="how long a claimed job is held (a test that waits past it takes a short one)",
    )  # fmt: skip
    # The engine's warnings (why it cannot deliver or store) are what the tests read.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
