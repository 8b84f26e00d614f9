"""tus upload locks, as tusd's: a HEAD or PATCH on an upload whose PATCH is still being
stored waits for it and answers the offset the server keeps; a silent (dead) PATCH is asked
to let go; a wrong `Upload-Offset` is refused before the body is read, across processes."""

from __future__ import annotations

import asyncio
import fcntl
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from server.embedded import EmbeddedServer, provision_device, start_server
from server.uploads.locks import FileLocks, UploadLocks
from tests.support.api import ServerApi
from tests.support.serve import ServerProcess
from tests.support.tus import TUS, create_upload, file_metadata, patch, raw_patch

PHOTO = os.urandom(300_000)


def lock_is_held(root: Path, location: str) -> bool:
    """Whether some process holds the upload's file lock (SQLite's cross-process layer)."""
    path = root / "locks" / location.rsplit("/", 1)[1]
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def wait_until(predicate: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def read_reply(connection: socket.socket, timeout: float = 10.0) -> bytes:
    connection.settimeout(timeout)
    reply = b""
    while b"\r\n\r\n" not in reply:
        block = connection.recv(65536)
        if not block:
            break
        reply += block
    return reply


def new_upload(api: ServerApi) -> tuple[str, str]:
    """A new upload of PHOTO: its Location, and its work order's id."""
    record = api.create()
    sent = file_metadata(record["id"], PHOTO)
    return create_upload(api.client, len(PHOTO), sent).headers["Location"], record["id"]


def test_head_waits_for_a_silent_patch_and_answers_what_it_stored(
    server: EmbeddedServer, api: ServerApi, tmp_path: Path
) -> None:
    """The issue's cut: the client's link died mid-PATCH and the server never heard of it
    (no FIN, no reset). The client's HEAD asks the silent PATCH to let go, and answers the
    bytes it had received, not the offset from before the PATCH."""
    location, _ = new_upload(api)
    assert patch(api.client, location, 0, PHOTO[:1000]).status_code == 204
    address, head = raw_patch(server.base_url, api.token, location, 1000, len(PHOTO) - 1000)
    with socket.create_connection(address) as silent:
        silent.sendall(head + PHOTO[1000:91_000])
        wait_until(lambda: lock_is_held(tmp_path / "attachments", location))
        answer = api.client.head(location, headers=TUS)
        assert (answer.status_code, answer.headers["Upload-Offset"]) == (200, "91000")
        # The let-go PATCH answers its (gone) client what it kept.
        reply = read_reply(silent)
        assert reply.startswith(b"HTTP/1.1 409")
        assert b"upload-offset: 91000" in reply.lower()
        assert b"upload_interrupted" in reply
    assert patch(api.client, location, 91_000, PHOTO[91_000:]).status_code == 204


def test_a_request_waits_for_a_live_patch_and_answers_the_offset_it_left(
    server: EmbeddedServer, api: ServerApi, tmp_path: Path
) -> None:
    """A PATCH still receiving bytes is not interrupted: a second PATCH from the old offset
    waits for it to finish, then is refused (409) with the offset the first one left."""
    location, _ = new_upload(api)
    address, head = raw_patch(server.base_url, api.token, location, 0, 100_000)
    replies: list[bytes] = []

    def trickle() -> None:
        with socket.create_connection(address) as slow:
            slow.sendall(head)
            for start in range(0, 100_000, 10_000):
                slow.sendall(PHOTO[start : start + 10_000])
                time.sleep(0.08)  # well inside the 1 s a silent body is given
            replies.append(read_reply(slow))

    sender = threading.Thread(target=trickle)
    sender.start()
    try:
        wait_until(lambda: lock_is_held(tmp_path / "attachments", location))
        began = time.monotonic()
        second = patch(api.client, location, 0, PHOTO[:50_000])
        waited = time.monotonic() - began
    finally:
        sender.join(15)
    assert replies, "the live PATCH got no answer"
    assert replies[0].startswith(b"HTTP/1.1 204"), replies
    assert (second.status_code, second.headers["Upload-Offset"]) == (409, "100000")
    assert second.json() == {"error": "offset_mismatch"}
    assert waited > 0.3  # it waited for the live PATCH rather than answer at once


def test_a_wrong_offset_is_refused_before_the_body_is_read(
    server: EmbeddedServer, api: ServerApi
) -> None:
    """With `Expect: 100-continue` the client sends no byte of a refused body: the 409 comes
    instead of `100 Continue`, and the connection ends. A right offset gets its 100."""
    location, _ = new_upload(api)
    expect = {"Expect": "100-continue"}
    address, head = raw_patch(server.base_url, api.token, location, 5000, 100_000, **expect)
    with socket.create_connection(address) as wrong:
        wrong.sendall(head)
        reply = read_reply(wrong)
        assert reply.startswith(b"HTTP/1.1 409"), reply
        assert b"upload-offset: 0" in reply.lower()
        assert b"connection: close" in reply.lower()
        wrong.settimeout(10)
        rest = reply.split(b"\r\n\r\n", 1)[1]
        while block := wrong.recv(65536):
            rest += block
        assert b"offset_mismatch" in rest  # then the server closed the connection
    address, head = raw_patch(server.base_url, api.token, location, 0, 1000, **expect)
    with socket.create_connection(address) as right:
        right.sendall(head)
        continued = read_reply(right)
        assert continued.startswith(b"HTTP/1.1 100 Continue")
        right.sendall(PHOTO[:1000])
        answer = continued.split(b"\r\n\r\n", 1)[1]
        while b"\r\n\r\n" not in answer:
            block = right.recv(65536)
            assert block, answer
            answer += block
        assert answer.startswith(b"HTTP/1.1 204"), answer
    assert api.client.head(location, headers=TUS).headers["Upload-Offset"] == "1000"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_lock_holds_across_server_processes(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two processes on one database and attachment directory (PostgreSQL: advisory locks;
    SQLite: file locks): a HEAD on the second waits for the first's silent PATCH, asks it to
    let go, and answers what it stored; the file then completes through the second."""
    if backend == "sqlite":
        db = f"sqlite:///{tmp_path / 'server.sqlite3'}"
    else:
        db = request.getfixturevalue("postgres").create_database("locks_across_processes")
    files = tmp_path / "files"
    args = ("--attachments-dir", str(files))
    with ServerProcess(db, *args) as first, ServerProcess(db, *args) as second:
        token = provision_device(db, "phone-1")
        one, two = ServerApi(first.base_url, token), ServerApi(second.base_url, token)
        try:
            location, entity_id = new_upload(one)
            address, head = raw_patch(first.base_url, token, location, 0, len(PHOTO))
            with socket.create_connection(address) as silent:
                silent.sendall(head + PHOTO[:60_000])
                # Its body has arrived once the first process wrote it to the partial file.
                partial = files / "partial" / location.rsplit("/", 1)[1]
                wait_until(lambda: partial.stat().st_size == 60_000)
                answer = two.client.head(location, headers=TUS)
                assert answer.headers["Upload-Offset"] == "60000"
                assert read_reply(silent).startswith(b"HTTP/1.1 409")
            assert patch(two.client, location, 60_000, PHOTO[60_000:]).status_code == 204
            record = one.client.get(f"/v1/records/{entity_id}").json()["record"]
            [attached] = record["attachments"]
            assert two.client.get(f"/v1/attachments/{attached['id']}").content == PHOTO
        finally:
            one.close()
            two.close()


def test_a_request_waits_a_bounded_time_then_answers_423(sqlite_url: str, tmp_path: Path) -> None:
    """A live PATCH that outlasts the wait (`upload_lock_wait_seconds`) keeps its upload; the
    request waiting for it gives up with 423 `upload_locked`, and the PATCH completes."""
    with start_server(sqlite_url, upload_lock_wait_seconds=0.5) as server:
        api = ServerApi(server.base_url, server.add_device("phone-1", "worker"))
        try:
            location, _ = new_upload(api)
            address, head = raw_patch(server.base_url, api.token, location, 0, len(PHOTO))
            replies: list[bytes] = []

            def trickle() -> None:
                with socket.create_connection(address) as slow:
                    slow.sendall(head)
                    for start in range(0, len(PHOTO), 15_000):  # 20 pieces, 1.6 s
                        slow.sendall(PHOTO[start : start + 15_000])
                        time.sleep(0.08)
                    replies.append(read_reply(slow))

            sender = threading.Thread(target=trickle)
            sender.start()
            try:
                wait_until(lambda: lock_is_held(tmp_path / "attachments", location))
                began = time.monotonic()
                waited = api.client.head(location, headers=TUS)
                took = time.monotonic() - began
            finally:
                sender.join(15)
            assert waited.status_code == 423
            assert 0.5 <= took < 5
            assert replies, "the live PATCH got no answer"
            assert replies[0].startswith(b"HTTP/1.1 204"), replies
        finally:
            api.close()


async def test_a_later_request_waits_for_an_earlier_one_still_on_its_way(tmp_path: Path) -> None:
    """The race a loaded server showed: the cut PATCH was still authenticating when the
    client's HEAD took the lock and answered the old offset. Requests take it in arrival order."""
    locks = UploadLocks(tmp_path, FileLocks(tmp_path), wait_s=5)
    upload = "ab" * 16
    locks.arrive(upload, 1.0)  # the PATCH
    locks.arrive(upload, 2.0)  # the HEAD after its cut
    order: list[str] = []

    async def head() -> None:
        async with locks.hold(upload, 2.0):
            order.append("head")

    waiting = asyncio.create_task(head())
    await asyncio.sleep(0.2)
    assert order == []  # the PATCH has not taken the lock yet, so the HEAD waits
    async with locks.hold(upload, 1.0):
        order.append("patch")
    locks.leave(upload, 1.0)
    await asyncio.wait_for(waiting, 5)
    assert order == ["patch", "head"]
