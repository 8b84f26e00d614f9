"""The device side of upload_bench: one phone attaching a file and uploading it, in its own
process (so its memory can be read from outside and it never shares a GIL with the server).

    FIELDSYNC_TOKEN=… python benchmarks/upload_device.py --data-dir D --server URL --file F \
        [--edits N --edit-window S] [--chunk-max BYTES] [--fast-retries]

Steps, each announced as one JSON line on stdout:
1. `{"event": "ready", ...}` once the store is open, the work order exists on the server (its
   create delivered first, as an attachment waits for it) and the file is attached (copied
   into the data dir and queued), timing the attach; then it waits for a line on stdin, so the
   parent can take its memory baseline while nothing moves.
2. The real `SyncEngine` uploads (the device's uploader, one chunk at a time, beside the
   engine's loop). Every progress event is timed; with `--edits N`, N edits of the work order
   are made at seeded moments within the first S seconds (`--edit-window`) after the upload's
   creation, whether or not a chunk ends then, and each is timed from the moment it is queued
   to the moment the server's answer is recorded (its job `done`), noting whether a chunk was
   on the wire when it was queued; the same edits are also timed with no upload running, once
   it has finished, as the baseline. `--chunk-max` sets the largest chunk.
3. `{"event": "done", "upload_s", "chunks_s", "chunks", "edits", ...}` and exit 0, where
   `chunks_s` runs from the upload's creation (its POST answered) to `uploaded`: the chunks
   alone, without the engine's start and its first pull. A failure prints
   `{"event": "failed", "error"}` and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_device import engine_config, run_child, say  # noqa: E402

from app.attachments import AttachmentConfig, Attachments  # noqa: E402
from app.events import EventBus, JobStatesChanged, UploadProgress  # noqa: E402
from app.states import AttachmentState  # noqa: E402
from app.store.backoff import BackoffPolicy  # noqa: E402
from app.store.queue import QueueConfig  # noqa: E402
from app.store.store import Store  # noqa: E402
from app.sync.engine import SyncEngine  # noqa: E402

#: With --fast-retries (the cut run) a retry comes within 0.1-0.5 s instead of the default
#: backoff's seconds, so five cuts take seconds; the bytes re-sent do not depend on it.
FAST_RETRIES = QueueConfig(
    lease_seconds=30.0, max_attempts=40, backoff=BackoffPolicy(initial=0.1, base=2.0, cap=0.5)
)


class Timeline:
    """Progress events and acknowledged jobs, stamped with `time.perf_counter()` as they come."""

    def __init__(self, attachment_id: str) -> None:
        self.attachment_id = attachment_id
        self.progress: list[tuple[float, int]] = []  # (at, offset the server holds)
        #: The first progress event: the upload exists on the server (its POST answered).
        self.created_at: float | None = None
        self.uploaded_at: float | None = None
        self.failed: str | None = None
        self.done_at: dict[int, float] = {}
        self.changed = asyncio.Event()

    def on_event(self, event: object) -> None:
        now = time.perf_counter()
        if isinstance(event, UploadProgress) and event.attachment_id == self.attachment_id:
            self.progress.append((now, event.offset))
            if self.created_at is None:
                self.created_at = now
            if event.state == AttachmentState.UPLOADED and self.uploaded_at is None:
                self.uploaded_at = now
            elif event.state == AttachmentState.FAILED:
                self.failed = event.reason or "failed"
            self.changed.set()
        elif isinstance(event, JobStatesChanged):
            for change in event.changes:
                if change.status == "done":
                    self.done_at.setdefault(change.job_id, now)
            self.changed.set()

    async def wait(self, condition: Any, limit_s: float) -> None:
        async with asyncio.timeout(limit_s):
            while not condition():
                if self.failed:
                    raise RuntimeError(f"upload failed: {self.failed}")
                self.changed.clear()
                await self.changed.wait()

    def chunks(self, started: float) -> list[dict[str, float]]:
        """Each acknowledged chunk: bytes and seconds since the previous acknowledgement."""
        out, last_at, last_offset = [], started, 0
        for at, offset in self.progress:
            if offset > last_offset:
                out.append({"bytes": offset - last_offset, "s": round(at - last_at, 5)})
                last_at, last_offset = at, offset
        return out


async def make_edit(engine: SyncEngine, store: Store, entity_id: str, text: str) -> int:
    def edit() -> int:
        return int(store.record_edit("update", entity_id, {"notes": text}).job_id)

    job_id = await engine.executor.run(edit)
    engine.wake()
    return job_id


async def timed_edits(
    engine: SyncEngine, store: Store, timeline: Timeline, entity_id: str, count: int, tag: str
) -> list[float]:
    """`count` edits one after another with nothing else queued: seconds each to `done`."""
    seconds = []
    for index in range(count):
        queued = time.perf_counter()
        job_id = await make_edit(engine, store, entity_id, f"{tag} {index}")
        await timeline.wait(lambda j=job_id: j in timeline.done_at, 60.0)
        seconds.append(timeline.done_at[job_id] - queued)
    return seconds


async def main_async(args: argparse.Namespace) -> int:
    token = os.environ["FIELDSYNC_TOKEN"]
    data_dir = Path(args.data_dir)
    rng = random.Random(args.seed)
    events = EventBus()
    queue_config = FAST_RETRIES if args.fast_retries else None
    store = Store(data_dir, queue_config=queue_config) if queue_config else Store(data_dir)
    try:
        entity_id = str(uuid.uuid4())
        store.record_edit("create", entity_id, {"title": "Upload bench", "site": "Loopback"})
        engine = SyncEngine(store, engine_config(args.server), events, token=lambda: token)
        if not await engine.run_until_idle(120.0):
            raise RuntimeError("the work order's create was not delivered")
        engine.executor.shutdown()

        attach_started = time.perf_counter()
        file = Path(args.file)
        # The device refuses files over the server's default limit; the memory run's is larger
        # (audio: a type the server accepts by default; the bytes are random).
        limits = AttachmentConfig(max_bytes=args.file_size, budget_bytes=1 << 40)
        view = Attachments(store, limits).attach(entity_id, file, filename="recording.wav")
        attach_s = time.perf_counter() - attach_started
        timeline = Timeline(view.id)
        events.subscribe(timeline.on_event)
        chunks = {"upload_chunk_max_bytes": args.chunk_max} if args.chunk_max else {}
        config = engine_config(args.server, **chunks)
        engine = SyncEngine(store, config, events, token=lambda: token)
        say("ready", attachment_id=view.id, entity_id=entity_id, size=view.size,
            sha256=view.sha256, attach_s=round(attach_s, 4))  # fmt: skip
        await asyncio.to_thread(sys.stdin.readline)

        runner = asyncio.create_task(engine.run())
        try:
            started = time.perf_counter()
            edits_alone: list[float] = []
            edits_behind: list[dict[str, float]] = []
            if args.edits:
                # The upload starts with the engine, so the baseline (the same edits with
                # nothing uploading) is measured after it, on the same connection pool.
                await timeline.wait(lambda: timeline.created_at is not None, 600.0)
                assert timeline.created_at is not None
                moments = sorted(
                    rng.uniform(0.1, 0.9) * args.edit_window for _ in range(args.edits)
                )
                for moment in moments:
                    await asyncio.sleep(max(timeline.created_at + moment - time.perf_counter(), 0))
                    if timeline.uploaded_at is not None:
                        break
                    mid_chunk = engine.uploads.running
                    queued = time.perf_counter()
                    job_id = await make_edit(engine, store, entity_id, f"behind {moment:.3f}")
                    await timeline.wait(lambda j=job_id: j in timeline.done_at, 600.0)
                    edits_behind.append(
                        {
                            "at_s": round(moment, 3),
                            "s": round(timeline.done_at[job_id] - queued, 5),
                            "mid_chunk": mid_chunk,
                            "upload_done_first": timeline.uploaded_at is not None
                            and timeline.uploaded_at < timeline.done_at[job_id],
                        }
                    )
            await timeline.wait(lambda: timeline.uploaded_at is not None, 1800.0)
            assert timeline.uploaded_at is not None
            assert timeline.created_at is not None
            upload_s = timeline.uploaded_at - started
            chunks_s = timeline.uploaded_at - timeline.created_at
            if args.edits:
                edits_alone = await timed_edits(
                    engine, store, timeline, entity_id, args.edits, "alone"
                )
        finally:
            await engine.stop()
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
        say("done", upload_s=round(upload_s, 4), chunks_s=round(chunks_s, 4), size=view.size,
            chunks=timeline.chunks(started), edits_behind=edits_behind,
            edits_alone_s=[round(s, 5) for s in edits_alone])  # fmt: skip
        return 0
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--file", required=True)
    parser.add_argument("--edits", type=int, default=0)
    parser.add_argument("--edit-window", type=float, default=1.0, metavar="S")
    parser.add_argument("--chunk-max", type=int, default=0, metavar="BYTES")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fast-retries", action="store_true")
    args = parser.parse_args()
    args.file_size = Path(args.file).stat().st_size
    return run_child(lambda: main_async(args))


if __name__ == "__main__":
    sys.exit(main())
