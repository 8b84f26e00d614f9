"""A finished upload as an attachment: its bytes (ETag, ranges, 304), its thumbnail, its
removal (idempotent, a tombstone in the feed), on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image

from server.embedded import EmbeddedServer, start_server
from tests.support.api import ServerApi, new_id
from tests.support.postgres import PostgresCluster
from tests.support.tus import TUS, create_upload, file_metadata, upload_whole


def jpeg(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 80, 20)).save(out, "JPEG")
    return out.getvalue()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmbeddedServer]:
    if request.param == "sqlite":
        url = request.getfixturevalue("server_sqlite")
    else:
        cluster: PostgresCluster = request.getfixturevalue("postgres")
        url = cluster.create_server_database(f"uploads_{new_id().replace('-', '')[:12]}")
    with start_server(url, attachments_dir=str(tmp_path / "files")) as running:
        yield running


@pytest.fixture
def phone(backend: EmbeddedServer) -> Iterator[ServerApi]:
    api = ServerApi(backend.base_url, backend.add_device("phone-1"))
    yield api
    api.close()


def attach(api: ServerApi, entity_id: str, data: bytes, **values: str) -> dict[str, str]:
    _, sent = upload_whole(api.client, entity_id, data, **values)
    return sent


def test_bytes_with_etag_ranges_and_not_modified(phone: ServerApi) -> None:
    record = phone.create()
    data = os.urandom(10_000)
    sent = attach(phone, record["id"], data, content_type="application/pdf", filename="a.pdf")
    url = f"/v1/attachments/{sent['attachment_id']}"
    whole = phone.client.get(url)
    assert whole.status_code == 200
    assert whole.content == data
    assert whole.headers["ETag"] == f'"{sent["sha256"]}"'
    assert whole.headers["Content-Type"] == "application/pdf"
    part = phone.client.get(url, headers={"Range": "bytes=100-199"})
    assert (part.status_code, part.content) == (206, data[100:200])
    assert part.headers["Content-Range"] == "bytes 100-199/10000"
    tail = phone.client.get(url, headers={"Range": "bytes=-10"})
    assert (tail.status_code, tail.content) == (206, data[-10:])
    rest = phone.client.get(url, headers={"Range": "bytes=9990-"})
    assert rest.content == data[9990:]
    beyond = phone.client.get(url, headers={"Range": "bytes=10000-"})
    assert beyond.status_code == 416
    assert beyond.headers["Content-Range"] == "bytes */10000"
    same = phone.client.get(url, headers={"If-None-Match": whole.headers["ETag"]})
    assert (same.status_code, same.content) == (304, b"")
    assert phone.client.get(f"/v1/attachments/{new_id()}").status_code == 404
    with httpx.Client(base_url=phone.base_url) as stranger:
        assert stranger.get(url).status_code == 401


def test_a_thumbnail_is_a_small_jpeg(backend: EmbeddedServer, phone: ServerApi) -> None:
    record = phone.create()
    photo = jpeg(1600, 900)
    sent = attach(phone, record["id"], photo)
    url = f"/v1/attachments/{sent['attachment_id']}/thumbnail"
    answer = phone.client.get(url)
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "image/jpeg"
    with Image.open(io.BytesIO(answer.content)) as thumbnail:
        assert thumbnail.format == "JPEG"
        assert max(thumbnail.size) == 256
        assert thumbnail.size == (256, 144)
    cached = backend.app.state.server.blobs.thumbnail_path(sent["sha256"])
    assert cached.read_bytes() == answer.content
    again = phone.client.get(url, headers={"If-None-Match": answer.headers["ETag"]})
    assert again.status_code == 304
    text = attach(phone, record["id"], b"meter 4711", content_type="text/plain")
    refused = phone.client.get(f"/v1/attachments/{text['attachment_id']}/thumbnail")
    assert (refused.status_code, refused.json()["error"]) == (415, "unsupported_media_type")


def test_removal_is_idempotent_and_leaves_a_tombstone(phone: ServerApi) -> None:
    record = phone.create()
    sent = attach(phone, record["id"], b"first photo")
    kept = attach(phone, record["id"], b"second photo")
    before = phone.changes()
    url = f"/v1/attachments/{sent['attachment_id']}"
    removed = phone.client.delete(url, headers={"Idempotency-Key": "remove-1"})
    assert removed.status_code == 200, removed.text
    tombstone = removed.json()["attachment"]
    assert (tombstone["id"], tombstone["deleted"], tombstone["deleted_by"]) == (
        sent["attachment_id"],
        True,
        "phone-1",
    )
    replay = phone.client.delete(url, headers={"Idempotency-Key": "remove-1"})
    assert replay.json() == removed.json()
    assert replay.headers["Idempotent-Replayed"] == "true"
    page = phone.changes(before["next"])
    assert page["attachments"] == [tombstone]
    assert page["changes"] == []  # the work order did not move
    read = phone.client.get(f"/v1/records/{record['id']}").json()["record"]
    assert read["version"] == 1
    assert [item["id"] for item in read["attachments"]] == [kept["attachment_id"]]
    assert phone.client.get(url).status_code == 404
    other_key = phone.client.delete(url, headers={"Idempotency-Key": "remove-2"})
    assert other_key.json() == removed.json()  # removing a removed one: its tombstone
    assert phone.client.delete(url).status_code == 400
    unknown = phone.client.delete(f"/v1/attachments/{new_id()}", headers={"Idempotency-Key": "k"})
    assert unknown.status_code == 404


def test_the_feed_pages_records_and_attachments_in_one_order(phone: ServerApi) -> None:
    first = phone.create()
    sent = attach(phone, first["id"], b"photo")
    second = phone.create()
    pages = []
    since = None
    while True:
        page = phone.changes(since, limit=1)
        pages.append(page)
        since = page["next"]
        if not page["has_more"]:
            break
    assert [page["changes"][0]["id"] if page["changes"] else None for page in pages] == [
        first["id"],
        None,
        second["id"],
    ]
    assert pages[1]["attachments"][0]["id"] == sent["attachment_id"]
    # A record in the feed is its current state: the attachment is on it too.
    [listed] = pages[0]["changes"][0]["attachments"]
    assert listed["id"] == sent["attachment_id"]
    assert "attachments" not in pages[2]["changes"][0]


def test_two_posts_of_one_attachment_at_once_make_one_upload(phone: ServerApi) -> None:
    record = phone.create()
    data = os.urandom(1000)
    sent = file_metadata(record["id"], data)
    locations: list[str] = []

    def post() -> None:
        with httpx.Client(base_url=phone.base_url, headers=phone.client.headers) as client:
            answer = create_upload(client, len(data), sent)
            assert answer.status_code == 201, answer.text
            locations.append(answer.headers["Location"])

    threads = [threading.Thread(target=post) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(locations)) == 1
    head = phone.client.head(locations[0], headers=TUS)
    assert head.headers["Upload-Length"] == "1000"


def test_the_same_bytes_twice_are_stored_once(backend: EmbeddedServer, phone: ServerApi) -> None:
    record = phone.create()
    data = os.urandom(5000)
    one = attach(phone, record["id"], data)
    two = attach(phone, record["id"], data, filename="copy.jpg")
    assert one["attachment_id"] != two["attachment_id"]
    root = backend.app.state.server.blobs.root
    assert [path.name for path in (root / "sha256").rglob("*") if path.is_file()] == [one["sha256"]]
    assert list((root / "partial").iterdir()) == []
    for sent in (one, two):
        assert phone.client.get(f"/v1/attachments/{sent['attachment_id']}").content == data
