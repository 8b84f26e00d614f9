"""The pure parts of the tus client: what a reply means, how big the next chunk is, and the
checksum made ahead of the next chunk."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from app.states import Reason
from app.sync.errors import classify_status
from app.sync.tus import ChecksumAhead, ChunkSizer, Next, chunk_checksum, classify

MIB = 1 << 20


@pytest.mark.parametrize(
    ("status", "step", "error", "expected", "code"),
    [
        (201, "create", None, Next.GO_ON, Reason.APPLIED),
        (204, "patch", None, Next.GO_ON, Reason.APPLIED),
        (401, "patch", None, Next.SIGN_IN, Reason.SIGNED_OUT),
        (404, "create", "not_found", Next.FAIL, Reason.NOT_FOUND),
        (404, "patch", "not_found", Next.RESTART, Reason.NOT_FOUND),
        (410, "head", "upload_expired", Next.RESTART, Reason.NOT_FOUND),
        (409, "patch", "offset_mismatch", Next.HEAD, Reason.REFUSED),
        (409, "delete", "upload_complete", Next.GO_ON, Reason.APPLIED),
        (403, "create", "forbidden", Next.FAIL, Reason.FORBIDDEN),
        (409, "create", "idempotency_key_in_use", Next.RETRY, Reason.KEY_IN_USE),
        (413, "create", None, Next.FAIL, Reason.TOO_LARGE),
        (415, "create", None, Next.FAIL, Reason.UNSUPPORTED_TYPE),
        (422, "create", "idempotency_key_reused", Next.FAIL, Reason.KEY_REUSED),
        (422, "create", "invalid_payload", Next.FAIL, Reason.INVALID),
        (423, "patch", "upload_locked", Next.RETRY, Reason.SERVER_BUSY),
        (429, "patch", None, Next.RETRY, Reason.RATE_LIMITED),
        (460, "patch", "checksum_mismatch", Next.RETRY, Reason.CHECKSUM_MISMATCH),
        (503, "patch", None, Next.RETRY, Reason.SERVER_BUSY),
        (507, "create", "upload_budget_exceeded", Next.RETRY, Reason.SERVER_BUSY),
        (507, "patch", "insufficient_storage", Next.RETRY, Reason.SERVER_BUSY),
        (500, "head", None, Next.RETRY, Reason.SERVER_ERROR),
        (418, "create", None, Next.FAIL, Reason.REFUSED),
    ],
)
def test_each_reply_has_one_meaning(
    status: int, step: str, error: str | None, expected: Next, code: Reason
) -> None:
    verdict = classify(status, step, error)
    assert (verdict.next, verdict.code) == (expected, code)


#: The rows tus adds; every other status is the shared table's.
_TUS_ROWS = (
    {(404, s) for s in ("create", "head", "patch", "delete")}
    | {(410, s) for s in ("create", "head", "patch", "delete")}
    | {(409, "patch"), (409, "delete"), (423, "patch"), (460, "patch")}
    | {(507, "create"), (507, "patch")}
)


@pytest.mark.parametrize("step", ["create", "head", "patch", "delete"])
def test_every_other_status_is_the_shared_tables(step: str) -> None:
    for status in [*range(200, 206), *range(400, 432), 451, *range(500, 512)]:
        if (status, step) in _TUS_ROWS or (status in (423, 460)) or 200 <= status < 300:
            continue
        for error in (None, "idempotency_key_in_use", "idempotency_key_reused"):
            shared = classify_status(status, error)
            verdict = classify(status, step, error).verdict
            assert (verdict.kind, verdict.code) == (shared.kind, shared.code), (status, error)


def test_a_file_is_refused_in_a_files_words() -> None:
    assert classify(413, "create").reason == "the file is larger than the server accepts"
    assert classify(415, "create").reason == "the server does not accept files of this type"
    assert classify(422, "create", "invalid_payload").reason == (
        "the server refused the upload (invalid_payload)"
    )
    assert classify(507, "create", "storage_budget_exceeded").reason == (
        "the server has no room for the file now; it is tried again later"
    )
    # A transient family keeps the shared words.
    assert classify(503, "patch").reason == classify_status(503).reason


def test_chunks_start_at_one_mib_and_grow_to_what_the_link_shows_up_to_eight() -> None:
    sizer = ChunkSizer(target_s=2.0)
    assert sizer.size == MIB
    # 1 MiB in 0.5 s (2 MiB/s): 4 MiB is what the link sends in 2 s.
    assert sizer.sent(MIB, 0.5) == 4 * MIB
    # Loopback: at the limit at once, and there it stays.
    assert [sizer.sent(sizer.size, 0.01) for _ in range(3)] == [8 * MIB] * 3


def test_chunks_shrink_on_a_slow_link_and_after_failures() -> None:
    sizer = ChunkSizer(target_s=2.0)
    # 1 MiB took 8 s (128 KiB/s): aim at 2 s a chunk, halving at most per step.
    assert sizer.sent(MIB, 8.0) == MIB // 2
    assert sizer.sent(MIB // 2, 4.0) == 256 * 1024
    assert sizer.sent(256 * 1024, 2.0) == 256 * 1024, "the floor"
    fast = ChunkSizer()
    assert fast.sent(MIB, 0.01) == 8 * MIB
    assert fast.failed() == 4 * MIB


def test_a_short_last_chunk_does_not_change_the_size() -> None:
    sizer = ChunkSizer()
    assert sizer.sent(1000, 5.0) == MIB


async def test_the_next_chunks_checksum_is_made_while_the_current_one_is_sent(
    tmp_path: Path,
) -> None:
    path = tmp_path / "photo.jpg"
    path.write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    ahead = ChecksumAhead()

    async def send() -> str:
        return "204"

    assert await ahead.sending(send(), path, 4096, 8192) == "204"
    made_ahead = chunk_checksum(path, 4096, 8192)
    path.write_bytes(b"\0" * MIB)  # the bytes change after the checksum was made ahead
    assert await ahead.checksum(path, 4096, 8192) == made_ahead
    # Used once; another range, or the same range again, is read now.
    assert await ahead.checksum(path, 4096, 8192) == chunk_checksum(path, 4096, 8192)
    assert chunk_checksum(path, 4096, 8192) != made_ahead


async def test_a_failed_send_leaves_no_checksum_ahead(tmp_path: Path) -> None:
    path = tmp_path / "photo.jpg"
    path.write_bytes(b"\1" * MIB)
    ahead = ChecksumAhead()

    async def cut() -> str:
        raise OSError("connection reset")

    with pytest.raises(OSError, match="connection reset"):
        await ahead.sending(cut(), path, 0, MIB)
    path.write_bytes(b"\2" * MIB)
    assert await ahead.checksum(path, 0, MIB) == chunk_checksum(path, 0, MIB)
    digest = base64.b64encode(hashlib.sha256(b"\2" * MIB).digest()).decode()
    assert chunk_checksum(path, 0, MIB) == f"sha256 {digest}"


def test_chunks_grow_past_eight_mib_while_no_edit_waits_and_shrink_back_while_one_does() -> None:
    sizer = ChunkSizer(MIB, 64 * MIB, target_s=8.0, busy_high=8 * MIB)
    assert sizer.next(busy=False) == MIB
    # 1 MiB in 0.05 s (20 MiB/s): 160 MiB in 8 s, the limit.
    assert sizer.sent(MIB, 0.05) == 64 * MIB
    assert sizer.next(busy=True) == 8 * MIB, "an edit came: the next chunk is small again"
    # The small chunk went at the same speed: it says the same of the link.
    assert sizer.sent(8 * MIB, 0.4) == 64 * MIB
    assert sizer.next(busy=False) == 64 * MIB, "no edit waits: large again at once"
    # 20 Mbit/s: what the link sends in 8 s, on a whole MiB (where a checksum is kept ahead).
    slow = ChunkSizer(MIB, 64 * MIB, target_s=8.0, busy_high=8 * MIB)
    assert slow.sent(MIB, MIB * 8 / 20e6) == 19 * MIB
    assert slow.next(busy=True) == 8 * MIB


def test_a_failed_chunk_leaves_the_next_one_small() -> None:
    """A cut chunk is sent again whole: after one, the next is no larger than while edits flow."""
    sizer = ChunkSizer(MIB, 64 * MIB, target_s=8.0, busy_high=8 * MIB)
    assert sizer.sent(MIB, 0.01) == 64 * MIB
    assert sizer.failed() == 8 * MIB
    assert sizer.failed() == 4 * MIB, "halved again on the next failure"
    assert sizer.sent(4 * MIB, 0.01) == 64 * MIB, "a chunk went through at speed: large again"


async def test_the_checksum_ahead_fits_a_next_chunk_of_any_size(tmp_path: Path) -> None:
    path = tmp_path / "survey.pdf"
    path.write_bytes(bytes(range(256)) * (4096 * 6))  # 6 MiB

    async def send() -> str:
        return "204"

    ahead = ChecksumAhead()
    await ahead.sending(send(), path, MIB, 2 * MIB)
    path.write_bytes(b"\0" * 6 * MIB)  # changed after it was hashed ahead: the marks say so
    made_ahead = await ahead.checksum(path, MIB, MIB)  # shrunk: the digest at a whole MiB
    assert made_ahead != chunk_checksum(path, MIB, MIB)
    path.write_bytes(bytes(range(256)) * (4096 * 6))
    assert made_ahead == chunk_checksum(path, MIB, MIB)
    # Grown past what was hashed: it goes on from the running hash, to the right digest.
    await ahead.sending(send(), path, MIB, 2 * MIB)
    assert await ahead.checksum(path, MIB, 5 * MIB) == chunk_checksum(path, MIB, 5 * MIB)
    # Not on a mark, or another offset: read again.
    await ahead.sending(send(), path, MIB, 2 * MIB)
    assert await ahead.checksum(path, MIB, MIB + 5) == chunk_checksum(path, MIB, MIB + 5)
    await ahead.sending(send(), path, MIB, 2 * MIB)
    assert await ahead.checksum(path, 0, MIB) == chunk_checksum(path, 0, MIB)


async def test_a_next_chunk_ends_where_the_hashing_ahead_got(tmp_path: Path) -> None:
    path = tmp_path / "survey.pdf"
    path.write_bytes(bytes(range(256)) * (4096 * 8))  # 8 MiB

    async def send() -> str:
        return "204"

    ahead = ChecksumAhead()
    await ahead.sending(send(), path, MIB, MIB, 3 * MIB)  # this chunk's size, then up to 3x
    assert ahead.ready_length(path, MIB, 64 * MIB) == 3 * MIB, "no further than hashed"
    assert ahead.ready_length(path, MIB, 2 * MIB + 5) == 2 * MIB, "on the last MiB hashed"
    assert ahead.ready_length(path, 0, 64 * MIB) == 64 * MIB, "another offset: made when sent"
    path.write_bytes(b"\0" * 8 * MIB)  # changed after it was hashed ahead: the digest says so
    assert await ahead.checksum(path, MIB, 3 * MIB) != chunk_checksum(path, MIB, 3 * MIB)
    # A chunk under a MiB has its digest ahead too, at its own size.
    quarter = 256 * 1024
    await ahead.sending(send(), path, quarter, quarter, 3 * quarter)
    assert ahead.ready_length(path, quarter, quarter) == quarter
    path.write_bytes(b"\1" * 8 * MIB)
    assert await ahead.checksum(path, quarter, quarter) != chunk_checksum(path, quarter, quarter)


async def test_a_next_chunk_that_reaches_the_end_goes_whole_without_a_checksum(
    tmp_path: Path,
) -> None:
    path = tmp_path / "survey.pdf"
    path.write_bytes(bytes(range(256)) * (4096 * 8))  # 8 MiB

    async def send() -> str:
        return "204"

    ahead = ChecksumAhead()
    await ahead.sending(send(), path, MIB, MIB, 3 * MIB)  # hashed on as far as 3 MiB
    # The rest of the file: one chunk, past what was hashed; the file's sha256 covers it.
    assert await ahead.next_chunk(path, MIB, 7 * MIB, 8 * MIB) == (7 * MIB, None)
    await ahead.sending(send(), path, MIB, MIB, 3 * MIB)
    # Short of the end: no further than hashed, with that range's checksum.
    length, checksum = await ahead.next_chunk(path, MIB, 5 * MIB, 8 * MIB)
    assert (length, checksum) == (3 * MIB, chunk_checksum(path, MIB, 3 * MIB))
