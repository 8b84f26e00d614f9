"""The drain the sync benchmarks share: offline creates, the server's own ingest, the check after.

`sync_bench.py` (the engine in process) and `cli_sync_bench.py` (the user's command) both drain
a device's offline creates into a fresh `ServerProcess` (`bench_server.py`) and compare it with
the server's own batch ingest of as many creates, posted straight from httpx with as many
batches in flight as the engine keeps. Both take the creates, the reference and the count of
what the server holds from here, so that the two measure the same thing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from app.store.store import Store
from app.sync.engine import SyncConfig

__all__ = [
    "BATCH",
    "FIELDS",
    "IN_FLIGHT",
    "LARGEST_BATCH",
    "drain_batches",
    "expect_on_server",
    "offline_creates",
    "offline_device",
    "reference_ingest",
    "server_count",
]

FIELDS = {"title": "Replace pump seal", "site": "Depot 4, bay 2", "notes": "Leaks at 3 bar."}
_ENGINE = SyncConfig(server_url="unused")
#: The engine's first batch, and the reference's.
BATCH = _ENGINE.batch_size
#: What the engine's batches grow to while they come back full; the reference's grow as far.
LARGEST_BATCH = _ENGINE.largest_batch
#: Batches the engine keeps on the wire; the reference keeps as many.
IN_FLIGHT = _ENGINE.delivery_pipeline


def drain_batches(config: SyncConfig) -> str:
    """How the engine of `config` batches a drain, in words."""
    if config.batch_size == 1:
        return "one mutation per request"
    if config.largest_batch == config.batch_size:
        return f"batches of {config.batch_size}"
    return f"batches of {config.batch_size}, growing to {config.largest_batch} while full"


def offline_creates(count: int) -> Iterator[dict[str, Any]]:
    """The fields of `count` work orders, as a day offline leaves them."""
    for index in range(count):
        yield {**FIELDS, "title": f"Work order {index}"}


@contextlib.contextmanager
def offline_device(data_dir: Path, edits: int) -> Iterator[Store]:
    """A device's store holding `edits` offline creates (imported, not timed); closed after."""
    store = Store(data_dir)
    try:
        store.import_records(offline_creates(edits))
        yield store
    finally:
        store.close()


async def reference_ingest(base_url: str, token: str, mutations: list[dict[str, Any]]) -> float:
    """Seconds to post `mutations` to `POST /v1/mutations/batch` in the engine's batches, on
    kept-alive connections, each with a correlation id as the engine sends.

    The same work as the engine's flush, so that the ratio measures the engine and not a batch
    size: one batch of BATCH first, then IN_FLIGHT at a time, each answered batch doubling the
    size of the next up to LARGEST_BATCH (`app/sync/pipeline.py` grows its batches alike)."""
    size, sent = BATCH, 0
    headers = {"Authorization": f"Bearer {token}"}

    def next_body() -> dict[str, Any] | None:
        nonlocal sent
        if sent >= len(mutations):
            return None
        batch = mutations[sent : sent + size]
        sent += len(batch)
        return {"mutations": batch}

    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60.0) as client:
        await client.get("/healthz")  # open the first connection, as the engine's probe does

        async def post(body: dict[str, Any]) -> None:
            nonlocal size
            reply = await client.post(
                "/v1/mutations/batch", json=body, headers={"X-Correlation-ID": str(uuid.uuid4())}
            )
            reply.raise_for_status()
            statuses = {item["status"] for item in reply.json()["results"]}
            if statuses != {201}:
                raise RuntimeError(f"reference batch answered {statuses}")
            size = min(size * 2, LARGEST_BATCH)

        async def post_batches() -> None:
            while (body := next_body()) is not None:  # each poster takes the next batch
                await post(body)

        started = time.perf_counter()
        first = next_body()
        if first is not None:
            await post(first)
        async with asyncio.TaskGroup() as posters:
            for _ in range(IN_FLIGHT):
                posters.create_task(post_batches())
        return time.perf_counter() - started


def server_count(base_url: str, token: str) -> int:
    """Records the device of `token` sees on the server, by paging the feed (a check, not timed)."""
    total, since = 0, "0"
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=30.0) as client:
        while True:
            reply = client.get("/v1/changes", params={"since": since, "limit": 1000})
            reply.raise_for_status()
            page = reply.json()
            total += len(page["changes"])
            since = page["next"]
            if not page["has_more"]:
                return total


def expect_on_server(base_url: str, token: str, edits: int, after: str) -> None:
    """Fails the run unless the device of `token` sees `edits` records on the server."""
    found = server_count(base_url, token)
    if found != edits:
        raise RuntimeError(f"the server holds {found} of {edits} records after {after}")
