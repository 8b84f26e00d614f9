"""Uploads beside the engine's loop, against the real server on loopback: an edit is delivered
on its own connection while a chunk is on the wire, chunks grow while no edit waits and keep
small once one came, and the device holds less than a chunk in memory."""

from __future__ import annotations

import asyncio
import hashlib
import sys
import time
import tracemalloc
from pathlib import Path

import httpx

from app.attachments import Attachments
from app.events import JobStatesChanged, UploadProgress
from app.states import AttachmentState
from app.store.store import Store
from app.sync.engine import SyncEngine
from server.embedded import EmbeddedServer
from tests.sync.fake_clock import FakeClock
from tests.sync.sync_support import (
    close_engine_thread,
    make_engine,
    running,
    sync_until_idle,
    wait_until,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from link_proxy import ShapedLink  # noqa: E402

MIB = 1 << 20


def survey(tmp_path: Path, size: int) -> Path:
    """A file of ``size`` bytes of a type the server takes by default."""
    path = tmp_path / "site-survey.pdf"
    path.write_bytes(hashlib.sha256(b"survey").digest() * (size // 32))
    return path


class Chunks:
    """The engine's upload progress and acknowledged jobs, as they come."""

    def __init__(self, engine: SyncEngine) -> None:
        self.offsets: list[int] = [0]
        self.created = False  # the upload exists on the server (its POST answered)
        self.uploaded = False
        self.done_jobs: set[int] = set()
        engine.events.subscribe(self.on_event)

    def on_event(self, event: object) -> None:
        if isinstance(event, UploadProgress):
            self.created = True
            if event.offset > self.offsets[-1]:
                self.offsets.append(event.offset)
            self.uploaded = self.uploaded or event.state is AttachmentState.UPLOADED
        elif isinstance(event, JobStatesChanged):
            self.done_jobs.update(c.job_id for c in event.changes if c.status == "done")

    @property
    def sizes(self) -> list[int]:
        return [b - a for a, b in zip(self.offsets, self.offsets[1:], strict=False)]


async def delivered_work_order(store: Store, server: EmbeddedServer, token: str) -> str:
    """A work order the server holds, its create sent by an engine before: edits flowed
    then, not while the upload runs."""
    entity = store.record_edit("create", None, {"title": "Broken meter"}).entity_id
    await sync_until_idle(store, server.base_url, token)
    return entity


def note_on_server(server: EmbeddedServer, token: str, entity_id: str) -> object:
    with httpx.Client(base_url=server.base_url) as client:
        reply = client.get(f"/v1/records/{entity_id}", headers={"Authorization": f"Bearer {token}"})
    return reply.json()["record"]["notes"]


async def test_an_edit_is_delivered_on_its_own_connection_while_a_chunk_is_on_the_wire(
    tmp_path: Path, store: Store, server: EmbeddedServer
) -> None:
    token = server.add_device("phone-a")
    entity = await delivered_work_order(store, server, token)
    view = Attachments(store).attach(entity, survey(tmp_path, 6 * MIB))
    # 32 Mbit/s: the file's one chunk (the first is as large as the file) is 1.6 s on the wire.
    with ShapedLink(("127.0.0.1", int(server.base_url.rsplit(":", 1)[1])),
                    rate_bits=32e6, rtt_s=0.01) as link:  # fmt: skip
        engine = make_engine(
            store, link.base_url, token, upload_chunk_bytes=8 * MIB, upload_chunk_max_bytes=8 * MIB
        )
        chunks = Chunks(engine)
        async with running(engine) as runner:
            await wait_until(engine, runner, lambda: chunks.created)
            started = link.bytes_up
            deadline = time.monotonic() + 10
            while link.bytes_up < started + MIB:  # a sixth of the chunk has gone
                assert time.monotonic() < deadline, "the chunk never went"
                await asyncio.sleep(0.01)
            edit = store.record_edit("update", entity, {"notes": "valve replaced"})
            engine.wake()
            await wait_until(engine, runner, lambda: edit.job_id in chunks.done_jobs)
            assert not chunks.uploaded, "the edit was answered while the chunk was on the wire"
            await wait_until(engine, runner, lambda: chunks.uploaded)
    assert chunks.sizes == [view.size], "one chunk, the edit beside it"
    assert note_on_server(server, token, entity) == "valve replaced"
    assert link.connections >= 2


async def test_chunks_grow_while_no_edit_waits_and_keep_small_once_one_came(
    tmp_path: Path, store: Store, server: EmbeddedServer
) -> None:
    token = server.add_device("phone-a")
    entity = await delivered_work_order(store, server, token)
    view = Attachments(store).attach(entity, survey(tmp_path, 16 * MIB))
    engine = make_engine(
        store, server.base_url, token,
        upload_chunk_max_bytes=4 * MIB, upload_chunk_busy_bytes=MIB, upload_quiet_s=60.0,
    )  # fmt: skip
    chunks = Chunks(engine)
    edit_at: list[int] = []

    def edit_after_two_large_chunks(event: object) -> None:
        if isinstance(event, UploadProgress) and not edit_at and chunks.sizes.count(4 * MIB) == 2:
            edit_at.append(len(chunks.sizes))
            store.record_edit("update", entity, {"notes": "valve replaced"})
            engine.wake()

    engine.events.subscribe(edit_after_two_large_chunks)
    async with running(engine) as runner:
        await wait_until(engine, runner, lambda: chunks.uploaded, within_s=30.0)
    sizes = chunks.sizes
    assert sum(sizes) == view.size
    assert sizes[0] == MIB, "the first chunk measures the link"
    # A fast link: 3x the first (what was hashed while it went), then the largest chunks.
    assert sizes[1:4] == [3 * MIB, 4 * MIB, 4 * MIB]
    # The edit goes before the next chunk, and every chunk after it is small.
    assert set(sizes[edit_at[0] :]) == {MIB}, sizes
    assert note_on_server(server, token, entity) == "valve replaced"


async def test_the_device_holds_less_than_a_chunk_in_memory(
    tmp_path: Path, store: Store, server: EmbeddedServer
) -> None:
    token = server.add_device("phone-a")
    entity = await delivered_work_order(store, server, token)
    view = Attachments(store).attach(entity, survey(tmp_path, 16 * MIB))
    chunk = 8 * MIB
    engine = make_engine(
        store, server.base_url, token, upload_chunk_bytes=chunk, upload_chunk_max_bytes=chunk
    )
    chunks = Chunks(engine)
    # Every Python allocation of this process, the server's included (it runs in a thread).
    tracemalloc.start()
    try:
        async with running(engine) as runner:
            await wait_until(engine, runner, lambda: chunks.created)
            tracemalloc.reset_peak()
            before, _ = tracemalloc.get_traced_memory()
            await wait_until(engine, runner, lambda: chunks.uploaded, within_s=60.0)
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert chunks.sizes == [chunk] * 2
    assert peak - before < chunk, f"{(peak - before) / MIB:.1f} MiB at the peak"
    assert Attachments(store).get(view.id).state is AttachmentState.UPLOADED  # type: ignore[union-attr]


async def test_chunks_keep_small_for_the_quiet_time_after_edits_went(store: Store) -> None:
    clock = FakeClock()
    engine = make_engine(store, "http://server.test", "token", clock=clock, upload_quiet_s=5.0)
    try:
        assert not engine.uploader.edits_waiting()
        engine.uploads.edits_sent()
        assert engine.uploader.edits_waiting()
        clock.now += 4.9
        assert engine.uploader.edits_waiting()
        clock.now += 0.2
        assert not engine.uploader.edits_waiting(), "quiet again: chunks may grow"
        assert engine.uploader.client is not engine.client, "uploads have their own pool"
        assert engine.uploader.reads is engine.client
    finally:
        await engine.client.aclose()
        close_engine_thread(engine)
