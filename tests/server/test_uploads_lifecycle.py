"""Uploads over time and across processes: expiry (`Upload-Expires`, 410, pruning), files no
row needs, and two `fieldsync-server serve` processes sharing one attachment directory."""

from __future__ import annotations

import email.utils
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from server.embedded import EmbeddedServer, provision_device, start_server
from server.uploads.blobs import BlobStore
from server.uploads.lifecycle import prune_expired_uploads, prune_unused_files
from tests.support.api import ServerApi
from tests.support.serve import ServerProcess
from tests.support.tus import (
    TUS,
    create_upload,
    file_metadata,
    patch,
    raw_patch,
    upload_whole,
)

DAY = 86_400.0
PHOTO = os.urandom(200_000)


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


Clocked = tuple[Clock, EmbeddedServer, ServerApi]


@pytest.fixture
def clocked(tmp_path: Path) -> Iterator[Clocked]:
    """A server whose clock the test moves, and phone-1's client of it."""
    clock = Clock()
    with start_server(f"sqlite:///{tmp_path / 'server.sqlite3'}", clock=clock) as server:
        api = ServerApi(server.base_url, server.add_device("phone-1"))
        try:
            yield clock, server, api
        finally:
            api.close()


def test_an_idle_upload_expires_and_is_pruned(clocked: Clocked) -> None:
    clock, server, api = clocked
    record = api.create()
    sent = file_metadata(record["id"], PHOTO)
    created = create_upload(api.client, len(PHOTO), sent)
    expires = email.utils.parsedate_to_datetime(created.headers["Upload-Expires"])
    assert abs(expires.timestamp() - (clock.now + 7 * DAY)) < 2
    location = created.headers["Location"]
    clock.now += 6 * DAY
    moved = patch(api.client, location, 0, PHOTO[:1000])  # a chunk renews the lease
    renewed = email.utils.parsedate_to_datetime(moved.headers["Upload-Expires"])
    assert abs(renewed.timestamp() - (clock.now + 7 * DAY)) < 2
    clock.now += 7 * DAY + 1
    gone = api.client.head(location, headers=TUS)
    assert gone.status_code == 410
    assert api.client.head(location, headers=TUS).status_code == 404
    again = create_upload(api.client, len(PHOTO), sent)
    assert again.status_code == 201
    assert (again.headers["Upload-Offset"], again.headers["Location"] != location) == (
        "0",
        True,
    )
    context = server.app.state.server
    partial = context.blobs.partial_path(again.headers["Location"].rsplit("/", 1)[-1])
    assert partial.exists()
    clock.now += 8 * DAY
    assert prune_expired_uploads(context.store, context.blobs, context.settings) == 1
    assert not partial.exists()
    assert api.client.head(again.headers["Location"], headers=TUS).status_code == 404


def test_files_no_row_needs_are_collected(clocked: Clocked) -> None:
    clock, server, api = clocked
    record = api.create()
    _, kept = upload_whole(api.client, record["id"], b"kept photo")
    _, gone = upload_whole(api.client, record["id"], b"removed photo")
    removal = api.client.delete(
        f"/v1/attachments/{gone['attachment_id']}", headers={"Idempotency-Key": "r"}
    )
    assert removal.status_code == 200
    context = server.app.state.server
    blobs: BlobStore = context.blobs
    stray = blobs.partial_path("f" * 32)
    stray.write_bytes(b"a POST that died before its row")
    settings = context.settings
    assert prune_unused_files(context.store, blobs, settings) == 0  # all too young
    clock.now += 8 * DAY
    assert prune_unused_files(context.store, blobs, settings) == 2
    assert not stray.exists()
    assert not blobs.has_blob(gone["sha256"])
    assert blobs.has_blob(kept["sha256"])
    answer = api.client.get(f"/v1/attachments/{kept['attachment_id']}")
    assert answer.content == b"kept photo"


def test_serve_takes_the_attachment_settings(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'server.sqlite3'}"
    files = tmp_path / "elsewhere"
    with ServerProcess(db, "--attachments-dir", str(files), "--max-upload-mib", "1",
                       "--attachment-types", "text/plain") as server:  # fmt: skip
        assert httpx.options(f"{server.base_url}/v1/uploads").headers["Tus-Max-Size"] == str(
            1024 * 1024
        )
        token = provision_device(db, "phone-1")
        api = ServerApi(server.base_url, token)
        try:
            record = api.create()
            photo = create_upload(api.client, 10, file_metadata(record["id"], b"x" * 10))
            assert photo.status_code == 415
            big = b"x" * (1024 * 1024 + 1)
            too_big = create_upload(
                api.client, len(big), file_metadata(record["id"], big, content_type="text/plain")
            )
            assert too_big.status_code == 413
            _, sent = upload_whole(
                api.client, record["id"], b"meter 4711", content_type="text/plain"
            )
            assert (files / "sha256" / sent["sha256"][:2] / sent["sha256"]).read_bytes() == (
                b"meter 4711"
            )
        finally:
            api.close()


def test_two_server_processes_share_one_directory(tmp_path: Path) -> None:
    """A chunk sent to one process and the next to another; while one process is writing an
    upload a request on the other waits for it (tus upload locks), and the file still comes
    out whole."""
    db = f"sqlite:///{tmp_path / 'server.sqlite3'}"
    with ServerProcess(db) as first, ServerProcess(db) as second:
        token = provision_device(db, "phone-1")
        one, two = ServerApi(first.base_url, token), ServerApi(second.base_url, token)
        try:
            record = one.create()
            sent = file_metadata(record["id"], PHOTO)
            location = create_upload(one.client, len(PHOTO), sent).headers["Location"]
            assert create_upload(two.client, len(PHOTO), sent).headers["Location"] == location
            assert patch(one.client, location, 0, PHOTO[:50_000]).status_code == 204
            address, head = raw_patch(
                first.base_url, token, location, 50_000, declared=len(PHOTO) - 50_000
            )
            with socket.create_connection(address) as slow:
                slow.sendall(head + PHOTO[50_000:60_000])
                partial = tmp_path / "attachments" / "partial" / location.rsplit("/", 1)[1]
                deadline = time.monotonic() + 10
                while partial.stat().st_size != 60_000:
                    assert time.monotonic() < deadline
                    time.sleep(0.01)
                # The other process's PATCH waits for the silent one to let go, which stores
                # what it received; its own stale offset is then refused with the kept one.
                stale = patch(two.client, location, 50_000, PHOTO[50_000:])
                assert (stale.status_code, stale.headers["Upload-Offset"]) == (409, "60000")
            assert two.client.head(location, headers=TUS).headers["Upload-Offset"] == "60000"
            assert patch(two.client, location, 60_000, PHOTO[60_000:]).status_code == 204
            [attached] = one.client.get(f"/v1/records/{record['id']}").json()["record"][
                "attachments"
            ]
            assert one.client.get(f"/v1/attachments/{attached['id']}").content == PHOTO
            assert two.client.get(f"/v1/attachments/{attached['id']}").content == PHOTO
        finally:
            one.close()
            two.close()


def test_a_server_killed_mid_patch_resumes_from_the_last_acknowledged_offset(
    tmp_path: Path,
) -> None:
    """SIGKILL while a chunk is half written: the bytes past the acknowledged offset are on
    disk but not counted; after a restart HEAD says the old offset and the file comes out
    whole (the partial file is cut back before the next chunk is appended)."""
    db = f"sqlite:///{tmp_path / 'server.sqlite3'}"
    token = provision_device(db, "phone-1")
    server = ServerProcess(db).start()
    try:
        api = ServerApi(server.base_url, token)
        record = api.create()
        sent = file_metadata(record["id"], PHOTO)
        location = create_upload(api.client, len(PHOTO), sent).headers["Location"]
        assert patch(api.client, location, 0, PHOTO[:50_000]).status_code == 204
        partial = tmp_path / "attachments" / "partial" / location.rsplit("/", 1)[-1]
        address, head = raw_patch(
            server.base_url, token, location, 50_000, declared=len(PHOTO) - 50_000
        )
        with socket.create_connection(address) as slow:
            slow.sendall(head + PHOTO[50_000:120_000])
            deadline = time.monotonic() + 10
            while partial.stat().st_size < 120_000:
                assert time.monotonic() < deadline, partial.stat().st_size
                time.sleep(0.02)
            os.kill(server.pid, signal.SIGKILL)
            server.stop()
        api.close()
        server = ServerProcess(db).start()
        api = ServerApi(server.base_url, token)
        assert api.client.head(location, headers=TUS).headers["Upload-Offset"] == "50000"
        assert partial.stat().st_size == 120_000  # written, never acknowledged
        assert patch(api.client, location, 50_000, PHOTO[50_000:]).status_code == 204
        [attached] = api.client.get(f"/v1/records/{record['id']}").json()["record"]["attachments"]
        assert api.client.get(f"/v1/attachments/{attached['id']}").content == PHOTO
        api.close()
    finally:
        server.stop()


def test_a_database_from_before_attachments_gains_their_tables(tmp_path: Path) -> None:
    """A server database made before uploads existed: opening it adds the two tables and
    keeps every record, so the old server's data is served and attached to at once."""
    url = f"sqlite:///{tmp_path / 'server.sqlite3'}"
    with start_server(url) as old:
        token = old.add_device("phone-1")
        api = ServerApi(old.base_url, token)
        record = api.create()
        api.close()
        old.store.db.execute_sql('DROP TABLE "upload"')
        old.store.db.execute_sql('DROP TABLE "attachment"')
    with start_server(url) as upgraded:
        api = ServerApi(upgraded.base_url, token)
        try:
            assert api.client.get(f"/v1/records/{record['id']}").json()["record"] == record
            _, sent = upload_whole(api.client, record["id"], PHOTO)
            [attached] = api.client.get(f"/v1/records/{record['id']}").json()["record"][
                "attachments"
            ]
            assert attached["sha256"] == sent["sha256"]
        finally:
            api.close()
