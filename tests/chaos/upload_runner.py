"""One device finishing its attachments' uploads, for the upload chaos tests.

    FIELDSYNC_TOKEN=… python -m tests.chaos.upload_runner --data-dir D --server URL \
        --chunk BYTES

Runs the real store and sync engine (as `fieldsync worker` does: edits first, then uploads one
chunk per step) with a fixed chunk size, fast backoff and short timeouts, until nothing can move
and every attachment attached on this device is confirmed by the server; then prints
`runner: idle` and exits 0. The attachments are made beforehand by the test (attach is durable
once it returns); this process may be SIGKILLed at any instant and started again: everything
it needs to resume is in the data dir.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import random
import sys
from pathlib import Path

from app.store.db import connection
from app.store.store import Store
from app.sync.engine import SyncEngine
from tests.chaos.device_runner import QUEUE, deliverable, running, sync_config, wait_until

_UNCONFIRMED = (
    "SELECT COUNT(*) FROM attachments WHERE mine = 1 AND confirmed_at IS NULL "
    "AND removed_at IS NULL"
)


def unconfirmed(store: Store) -> int:
    """Attachments of this device the server has not confirmed whole."""
    return int(connection(store.db).execute(_UNCONFIRMED).fetchone()[0])


async def main_async(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    with Store(Path(args.data_dir), queue_config=QUEUE) as store:
        token = os.environ["FIELDSYNC_TOKEN"]
        config = dataclasses.replace(
            sync_config(args.server, rng, batch_size=10),
            upload_chunk_bytes=args.chunk,
            upload_chunk_max_bytes=args.chunk,
        )
        engine = SyncEngine(store, config, token=lambda: token, rng=rng)
        waiting = await engine.executor.run(unconfirmed, store)
        print(f"runner: start, {waiting} to upload", flush=True)

        async def finished() -> bool:
            left = await engine.executor.run(deliverable, store)
            return left == 0 and await engine.executor.run(unconfirmed, store) == 0

        async with running(engine) as runner:
            if not await wait_until(runner, finished, args.timeout, 0.1):
                return 1
    print("runner: idle", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--chunk", type=int, required=True, help="bytes per PATCH")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120.0)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
