"""The uploader against a tus server behind httpx.MockTransport: chunks, resumes, refusals."""

from __future__ import annotations

import gc
import hashlib
import random
import tracemalloc
from pathlib import Path

import httpx
import pytest

from app.attachments import Attachments, AttachmentView
from app.events import Event, EventBus, UploadProgress
from app.states import AttachmentState, JobStatus, Reason
from app.store.deadletters import list_dead
from app.store.store import Store
from app.sync.config import SyncConfig
from app.sync.give_up import give_up
from app.sync.uploader import Uploader
from tests.attachments.conftest import photo
from tests.attachments.fake_tus import FakeTus, cut_patch_after, lose_reply_of_last_patch
from tests.sync.fake_clock import FakeClock

MIB = 1 << 20
URL = "http://server.test"


@pytest.fixture
def server(tmp_path: Path) -> FakeTus:
    folder = tmp_path / "server"
    folder.mkdir()
    return FakeTus(folder)


def uploader_for(
    store: Store, server: FakeTus, events: EventBus | None = None, **config: int
) -> Uploader:
    return Uploader.standalone(
        store,
        SyncConfig(URL, **config),  # type: ignore[arg-type]
        token=lambda: "device-token",
        transport=server.transport(),
        events=events,
    )


async def drain(uploader: Uploader, clock: FakeClock, *, limit: int = 500) -> int:
    """Step until nothing is left, jumping the clock over backoffs; returns the steps."""
    steps = 0
    while steps < limit:
        if await uploader.step():
            steps += 1
            continue
        due = await uploader.executor.run(uploader.store.queue.next_attempt_at)
        if due is None:
            return steps
        clock.now += max(due - clock.time(), 0.0) + 0.01
    raise AssertionError("the upload never ended")


async def upload_all(
    store: Store, server: FakeTus, clock: FakeClock, events: EventBus | None = None, **config: int
) -> None:
    """A standalone uploader sends everything it can, then closes."""
    uploader = uploader_for(store, server, events, **config)
    try:
        await drain(uploader, clock)
    finally:
        await uploader.aclose()


def failed_view(attachments: Attachments, attachment_id: str) -> AttachmentView:
    view = attachments.get(attachment_id)
    assert view is not None
    assert view.state is AttachmentState.FAILED
    return view


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_a_file_goes_up_one_chunk_a_step_and_ends_uploaded(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, server: FakeTus, clock
) -> None:
    source = photo(tmp_path, size=5 * MIB + 123)
    view = attachments.attach(acked, source)
    seen: list[Event] = []
    events = EventBus()
    events.subscribe(seen.append)
    uploader = uploader_for(store, server, events, upload_chunk_max_bytes=MIB)
    try:
        steps = await drain(uploader, clock)
    finally:
        await uploader.aclose()
    assert server.completed() == {view.id: source.read_bytes()}
    assert steps == 1 + 6, "one create, then one chunk of at most 1 MiB a step"
    assert server.body_bytes() == source.stat().st_size, "no byte sent twice"
    # Every chunk has its checksum but the last: the whole file's sha256 covers that one.
    assert server.checksummed == [True] * 5 + [False]
    uploaded = attachments.get(view.id)
    assert uploaded is not None
    assert (uploaded.state, uploaded.offset) == (AttachmentState.UPLOADED, uploaded.size)
    progress = [e for e in seen if isinstance(e, UploadProgress)]
    offsets = [e.offset for e in progress]
    assert offsets == sorted(offsets)
    assert offsets[-1] == uploaded.size
    assert progress[-1].state is AttachmentState.UPLOADED
    assert store.stats()["uploads"] == {"waiting": 0, "failed": 0, "bytes_waiting": 0}


async def test_chunks_grow_on_a_fast_link_up_to_the_limit(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, server: FakeTus, clock
) -> None:
    attachments.attach(acked, photo(tmp_path, size=40 * MIB))
    await upload_all(store, server, clock, upload_chunk_max_bytes=16 * MIB)
    sizes = [size for method, _, _, size in server.requests if method == "PATCH"]
    assert sizes[0] == MIB
    # A fast link: each chunk at most 3x the last (what was hashed while it was on the wire,
    # so no chunk waits for its checksum), up to the limit.
    assert sizes[1:] == [3 * MIB, 9 * MIB, 16 * MIB, 11 * MIB]


async def test_a_cut_mid_chunk_resumes_from_the_servers_offset(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, server: FakeTus, clock
) -> None:
    source = photo(tmp_path, size=3 * MIB)
    view = attachments.attach(acked, source)
    server.faults.append(cut_patch_after(300_000)(server))
    await upload_all(store, server, clock, upload_chunk_max_bytes=MIB)
    assert server.completed() == {view.id: source.read_bytes()}
    offsets = [int(o) for m, _, o, _ in server.requests if m == "PATCH" and o is not None]
    assert 300_000 in offsets, "resumed at the byte the server held (HEAD), not at 0"
    resent = server.body_bytes() - source.stat().st_size
    assert 0 < resent <= MIB, "at most one chunk is sent again"
    assert [m for m, *_ in server.requests].count("HEAD") == 1


async def test_a_lost_reply_of_the_last_chunk_ends_uploaded_without_sending_again(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, server: FakeTus, clock
) -> None:
    source = photo(tmp_path, size=MIB + 5)
    view = attachments.attach(acked, source)
    server.faults.append(lose_reply_of_last_patch(server))
    await upload_all(store, server, clock, upload_chunk_max_bytes=MIB)
    assert server.completed() == {view.id: source.read_bytes()}
    assert server.body_bytes() == source.stat().st_size
    assert attachments.get(view.id).state is AttachmentState.UPLOADED  # type: ignore[union-attr]


async def test_a_restarted_app_resumes_the_stored_upload(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, server: FakeTus, clock
) -> None:
    source = photo(tmp_path, size=3 * MIB)
    view = attachments.attach(acked, source)
    first = uploader_for(store, server, upload_chunk_max_bytes=MIB)
    try:
        for _ in range(3):  # create, two chunks
            assert await first.step()
    finally:
        await first.aclose()
    halfway = attachments.get(view.id)
    assert halfway is not None
    assert (halfway.state, halfway.offset) == (AttachmentState.UPLOADING, 2 * MIB)
    again = uploader_for(store, server, upload_chunk_max_bytes=MIB)  # a new process
    try:
        await drain(again, clock)
    finally:
        await again.aclose()
    assert server.completed() == {view.id: source.read_bytes()}
    assert [m for m, *_ in server.requests].count("POST") == 1, "one upload, resumed"
    assert server.body_bytes() == source.stat().st_size


@pytest.mark.parametrize(
    ("status", "code", "words"),
    [
        (413, Reason.TOO_LARGE, "larger than the server accepts"),
        (415, Reason.UNSUPPORTED_TYPE, "does not accept files of this type"),
    ],
)
async def test_a_refused_file_fails_with_its_reason_and_goes_again_on_retry(
    tmp_path: Path,
    store: Store,
    attachments: Attachments,
    acked: str,
    server: FakeTus,
    clock: FakeClock,
    status: int,
    code: Reason,
    words: str,
) -> None:
    source = photo(tmp_path)
    view = attachments.attach(acked, source)
    refuse = [True]

    def refusal(request: httpx.Request) -> httpx.Response | None:
        return httpx.Response(status) if refuse[0] and request.method == "POST" else None

    server.faults.append(refusal)
    uploader = uploader_for(store, server)
    try:
        await drain(uploader, clock)
        failed = attachments.get(view.id)
        assert failed is not None
        assert failed.state is AttachmentState.FAILED
        assert failed.reason_code is code
        assert failed.reason is not None
        assert words in failed.reason
        assert failed.as_json()["reason"] == failed.reason
        assert store.stats()["uploads"]["failed"] == 1
        refuse[0] = False
        attachments.retry(view.id)
        await drain(uploader, clock)
    finally:
        await uploader.aclose()
    assert server.completed() == {view.id: source.read_bytes()}


async def test_an_unknown_work_order_fails_the_upload(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, server: FakeTus, clock
) -> None:
    server.known = set()
    view = attachments.attach(acked, photo(tmp_path))
    await upload_all(store, server, clock)
    failed = failed_view(attachments, view.id)
    assert failed.reason_code is Reason.NOT_FOUND


async def test_a_damaged_chunk_is_sent_again_from_the_same_offset(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, server: FakeTus, clock
) -> None:
    source = photo(tmp_path, size=2 * MIB)
    view = attachments.attach(acked, source)
    damaged = [1]

    def damage(request: httpx.Request) -> httpx.Response | None:
        if request.method == "PATCH" and damaged[0]:
            damaged[0] -= 1
            return httpx.Response(460)
        return None

    server.faults.append(damage)
    await upload_all(store, server, clock, upload_chunk_max_bytes=MIB)
    assert server.completed() == {view.id: source.read_bytes()}
    offsets = [o for m, _, o, _ in server.requests if m == "PATCH"]
    assert offsets[:2] == ["0", "0"]


async def test_a_wrong_offset_asks_the_server_and_resumes(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, server: FakeTus, clock
) -> None:
    source = photo(tmp_path, size=2 * MIB)
    view = attachments.attach(acked, source)
    uploader = uploader_for(store, server, upload_chunk_max_bytes=MIB)
    try:
        assert await uploader.step()  # create
        upload = next(iter(server.uploads.values()))
        # Another path (say, a reply lost on the way) moved the server on by 1000 bytes.
        server.keep(upload, source.read_bytes()[:1000])
        await drain(uploader, clock)
    finally:
        await uploader.aclose()
    assert server.completed() == {view.id: source.read_bytes()}
    assert [m for m, *_ in server.requests].count("HEAD") == 1


async def test_detach_before_the_upload_sends_nothing_but_the_removal(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, server: FakeTus, clock
) -> None:
    view = attachments.attach(acked, photo(tmp_path))
    attachments.detach(view.id)
    await upload_all(store, server, clock)
    assert [(m, p) for m, p, *_ in server.requests] == [("DELETE", f"/v1/attachments/{view.id}")]
    statuses = store.db.execute_sql("SELECT DISTINCT status FROM jobs").fetchall()
    assert statuses == [(JobStatus.DONE,)]


async def test_detach_after_the_upload_removes_it_on_the_server(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, server: FakeTus, clock
) -> None:
    view = attachments.attach(acked, photo(tmp_path))
    uploader = uploader_for(store, server)
    try:
        await drain(uploader, clock)
        attachments.detach(view.id)
        await drain(uploader, clock)
    finally:
        await uploader.aclose()
    assert server.removed == [view.id]
    assert store.queue.in_flight() == 0


async def test_a_network_failure_backs_off_and_keeps_the_offset(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, server: FakeTus, clock
) -> None:
    source = photo(tmp_path, size=2 * MIB)
    view = attachments.attach(acked, source)
    down = [2]

    def offline(request: httpx.Request) -> Exception | None:
        if request.method == "PATCH" and down[0]:
            down[0] -= 1
            return httpx.ConnectError("network unreachable", request=request)
        return None

    server.faults.append(offline)
    await upload_all(store, server, clock, upload_chunk_max_bytes=MIB)
    assert server.completed() == {view.id: source.read_bytes()}
    attempts = store.db.execute_sql(
        "SELECT outcome, reason_code FROM attempts WHERE job_id = "
        "(SELECT id FROM jobs WHERE idempotency_key = ?) ORDER BY id",
        (view.id,),
    ).fetchall()
    assert attempts == [("retry", "network"), ("retry", "network"), ("done", "applied")]


def test_random_source_is_reproducible(tmp_path: Path) -> None:
    assert digest(photo(tmp_path, "a", size=10)) == digest(photo(tmp_path, "b", size=10))
    assert random.Random(1).randbytes(4) == random.Random(1).randbytes(4)


async def test_a_copy_damaged_on_the_device_fails_instead_of_looping(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, server: FakeTus, clock
) -> None:
    view = attachments.attach(acked, photo(tmp_path, size=MIB // 2))
    assert view.local_path is not None
    damaged = bytearray(view.local_path.read_bytes())
    damaged[1000] ^= 0xFF
    view.local_path.write_bytes(bytes(damaged))
    await upload_all(store, server, clock)
    failed = failed_view(attachments, view.id)
    assert failed.reason_code is Reason.FILE_MISSING
    assert [m for m, *_ in server.requests].count("PATCH") == 1, "not sent again and again"
    assert server.completed() == {}


async def test_memory_stays_flat_whatever_the_file_size(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, server: FakeTus
) -> None:
    """The file is streamed from disk in pieces: each step of a 32 MiB upload in 1 MiB chunks
    allocates about one chunk (the fake server reads each request body whole), never the
    file. The fake transport's request bodies end in reference cycles: collected between
    steps, so what is measured is what one step holds."""
    source = tmp_path / "video.mp4"
    with source.open("wb") as out:
        for n in range(32):
            out.write(random.Random(n).randbytes(MIB))
    view = attachments.attach(acked, source)
    uploader = uploader_for(store, server, upload_chunk_max_bytes=MIB)
    peaks: list[int] = []
    tracemalloc.start()
    try:
        moved = True
        while moved:
            gc.collect()
            tracemalloc.reset_peak()
            moved = await uploader.step()
            peaks.append(tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()
        await uploader.aclose()
    assert view.id in server.completed()
    assert len(peaks) == 34, "a create, 32 chunks, and the empty claim"
    assert max(peaks) < 4 * MIB, f"a step held {max(peaks) / MIB:.1f} MiB"


async def test_giving_up_a_failed_upload_removes_the_attachment(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, server: FakeTus, clock
) -> None:
    server.known = set()
    view = attachments.attach(acked, photo(tmp_path))
    uploader = uploader_for(store, server)
    try:
        await drain(uploader, clock)
        [dead] = list_dead(store)
        assert dead.payload["attachment_id"] == view.id  # in the failed-changes list
        give_up(store, dead.id)
        await drain(uploader, clock)
    finally:
        await uploader.aclose()
    assert attachments.list_for(acked) == []
    assert view.local_path is not None
    assert not view.local_path.exists()
    assert store.queue.in_flight() == 0


async def test_a_saturated_server_holds_every_request_not_only_the_chunk(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, server: FakeTus, clock
) -> None:
    view = attachments.attach(acked, photo(tmp_path, size=2 * MIB))
    busy = [1]

    def saturated(request: httpx.Request) -> httpx.Response | None:
        if request.method == "PATCH" and busy[0]:
            busy[0] -= 1
            body = {"error": "server_busy"}
            return httpx.Response(429, headers={"Retry-After": "30"}, json=body)
        return None

    server.faults.append(saturated)
    uploader = uploader_for(store, server, upload_chunk_max_bytes=MIB)
    try:
        assert await uploader.step()  # create
        assert uploader.status.busy_for() == 0
        assert await uploader.step()  # the chunk, refused
        assert 29 < uploader.status.busy_for() <= 30, "edits and pulls wait too"
        await drain(uploader, clock)
    finally:
        await uploader.aclose()
    assert server.completed() == {view.id: (tmp_path / "meter.jpg").read_bytes()}
