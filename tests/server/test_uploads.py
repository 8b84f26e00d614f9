"""tus 1.0.0 under /v1/uploads through real HTTP: creation, HEAD, PATCH, checksums, the whole
file's sha256, another device's upload, termination, and the attachment that results."""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Callable

import httpx
import pytest

from server.embedded import EmbeddedServer
from server.uploads import receive
from tests.support.api import ServerApi, new_id
from tests.support.tus import (
    TUS,
    chunk_checksum,
    create_upload,
    file_metadata,
    patch,
    raw_patch,
    upload_whole,
)

PHOTO = os.urandom(300_000)


def test_options_says_what_the_server_speaks(server: EmbeddedServer) -> None:
    answer = httpx.options(f"{server.base_url}/v1/uploads")
    assert answer.status_code == 204
    assert answer.headers["Tus-Resumable"] == "1.0.0"
    assert answer.headers["Tus-Version"] == "1.0.0"
    assert answer.headers["Tus-Max-Size"] == str(100 * 1024 * 1024)
    extensions = answer.headers["Tus-Extension"].split(",")
    assert {"creation", "creation-with-upload", "checksum", "termination", "expiration"} <= set(
        extensions
    )
    assert "sha256" in answer.headers["Tus-Checksum-Algorithm"].split(",")


def test_an_upload_in_chunks_becomes_an_attachment_of_the_work_order(api: ServerApi) -> None:
    record = api.create()
    sent = file_metadata(record["id"], PHOTO)
    created = create_upload(api.client, len(PHOTO), sent)
    assert created.status_code == 201, created.text
    location = created.headers["Location"]
    assert location.startswith("/v1/uploads/")
    assert created.headers["Upload-Offset"] == "0"
    assert created.headers["Tus-Resumable"] == "1.0.0"
    assert "GMT" in created.headers["Upload-Expires"]
    head = api.client.head(location, headers=TUS)
    assert head.status_code == 200
    assert (head.headers["Upload-Offset"], head.headers["Upload-Length"]) == ("0", str(len(PHOTO)))
    assert head.headers["Cache-Control"] == "no-store"
    first = patch(api.client, location, 0, PHOTO[:100_000])
    assert (first.status_code, first.headers["Upload-Offset"]) == (204, "100000")
    assert api.client.head(location, headers=TUS).headers["Upload-Offset"] == "100000"
    last = patch(api.client, location, 100_000, PHOTO[100_000:])
    assert (last.status_code, last.headers["Upload-Offset"]) == (204, str(len(PHOTO)))

    read = api.client.get(f"/v1/records/{record['id']}").json()["record"]
    assert read["version"] == record["version"] == 1
    [attached] = read["attachments"]
    assert set(attached) == {"id", "filename", "content_type", "size", "sha256", "created_at",
                             "created_by"}  # fmt: skip
    assert attached["id"] == sent["attachment_id"]
    assert (attached["filename"], attached["content_type"]) == ("meter.jpg", "image/jpeg")
    assert (attached["size"], attached["sha256"]) == (len(PHOTO), sent["sha256"])
    assert attached["created_by"] == "phone-1"
    page = api.changes()
    [entry] = page["attachments"]
    assert entry == {**attached, "entity_id": record["id"], "deleted": False,
                     "deleted_at": None, "deleted_by": None}  # fmt: skip
    assert [change["version"] for change in page["changes"]] == [1]
    assert api.client.get(f"/v1/attachments/{attached['id']}").content == PHOTO


def test_the_same_attachment_id_finds_the_same_upload(api: ServerApi) -> None:
    record = api.create()
    sent = file_metadata(record["id"], PHOTO)
    location = create_upload(api.client, len(PHOTO), sent).headers["Location"]
    patch(api.client, location, 0, PHOTO[:1000])
    again = create_upload(api.client, len(PHOTO), sent)
    assert again.status_code == 201
    assert (again.headers["Location"], again.headers["Upload-Offset"]) == (location, "1000")
    patch(api.client, location, 1000, PHOTO[1000:])
    after = create_upload(api.client, len(PHOTO), sent)
    assert (after.headers["Location"], after.headers["Upload-Offset"]) == (
        location,
        str(len(PHOTO)),
    )
    read = api.client.get(f"/v1/records/{record['id']}").json()["record"]
    assert len(read["attachments"]) == 1


def test_an_attachment_id_reused_for_another_file_is_refused(api: ServerApi) -> None:
    record = api.create()
    sent = file_metadata(record["id"], PHOTO)
    assert create_upload(api.client, len(PHOTO), sent).status_code == 201
    longer = create_upload(api.client, len(PHOTO) + 1, sent)
    assert (longer.status_code, longer.json()) == (422, {"error": "idempotency_key_reused"})
    other_hash = create_upload(api.client, len(PHOTO), {**sent, "sha256": "0" * 64})
    assert (other_hash.status_code, other_hash.json()) == (422, {"error": "idempotency_key_reused"})


def test_refusals_of_a_new_upload(server: EmbeddedServer, api: ServerApi) -> None:
    record = api.create()
    unknown = create_upload(api.client, 10, file_metadata(new_id(), b"x" * 10))
    assert (unknown.status_code, unknown.json()) == (404, {"error": "not_found"})
    too_big = create_upload(api.client, 100 * 1024 * 1024 + 1, file_metadata(record["id"], b""))
    assert too_big.status_code == 413
    assert too_big.json()["error"] == "payload_too_large"
    program = create_upload(
        api.client, 10, file_metadata(record["id"], b"x" * 10, content_type="application/x-sh")
    )
    assert program.status_code == 415
    assert program.json()["error"] == "unsupported_media_type"
    for allowed in ("image/png", "application/pdf", "audio/ogg", "text/plain; charset=utf-8"):
        data = allowed.encode()
        answer = create_upload(
            api.client, len(data), file_metadata(record["id"], data, content_type=allowed)
        )
        assert answer.status_code == 201, (allowed, answer.text)
    no_version = api.client.post(
        "/v1/uploads", headers={"Upload-Length": "1", "Upload-Metadata": "filename eA=="}
    )
    assert no_version.status_code == 412
    assert no_version.headers["Tus-Version"] == "1.0.0"
    missing = create_upload(api.client, 1, {"filename": "a"})
    assert missing.status_code == 422
    assert "attachment_id" in missing.json()["detail"]
    with httpx.Client(base_url=server.base_url) as stranger:
        assert create_upload(stranger, 1, {"filename": "a"}).status_code == 401


def test_a_wrong_offset_is_a_conflict(api: ServerApi) -> None:
    record = api.create()
    location = create_upload(api.client, len(PHOTO), file_metadata(record["id"], PHOTO)).headers[
        "Location"
    ]
    patch(api.client, location, 0, PHOTO[:10])
    behind = patch(api.client, location, 0, PHOTO[:10])
    assert (behind.status_code, behind.json()) == (409, {"error": "offset_mismatch"})
    assert behind.headers["Upload-Offset"] == "10"
    ahead = patch(api.client, location, 20, PHOTO[20:30])
    assert ahead.status_code == 409
    assert api.client.head(location, headers=TUS).headers["Upload-Offset"] == "10"


def test_a_chunk_that_does_not_match_its_checksum_moves_nothing(api: ServerApi) -> None:
    record = api.create()
    location = create_upload(api.client, len(PHOTO), file_metadata(record["id"], PHOTO)).headers[
        "Location"
    ]
    good = patch(
        api.client, location, 0, PHOTO[:50], **{"Upload-Checksum": chunk_checksum(PHOTO[:50])}
    )
    assert (good.status_code, good.headers["Upload-Offset"]) == (204, "50")
    bad = patch(
        api.client, location, 50, PHOTO[50:100], **{"Upload-Checksum": chunk_checksum(b"other")}
    )
    assert bad.status_code == 460
    assert bad.json()["error"] == "checksum_mismatch"
    assert api.client.head(location, headers=TUS).headers["Upload-Offset"] == "50"
    unknown = patch(api.client, location, 50, PHOTO[50:100], **{"Upload-Checksum": "md5 AAAA"})
    assert (unknown.status_code, unknown.json()["error"]) == (400, "invalid_checksum")
    rest = patch(api.client, location, 50, PHOTO[50:])
    assert rest.status_code == 204


def test_the_last_byte_needs_the_whole_file_to_match(api: ServerApi) -> None:
    record = api.create()
    claimed = hashlib.sha256(b"what the device meant to send").hexdigest()
    sent = file_metadata(record["id"], PHOTO, sha256=claimed)
    location = create_upload(api.client, len(PHOTO), sent).headers["Location"]
    assert patch(api.client, location, 0, PHOTO[:1000]).status_code == 204
    last = patch(api.client, location, 1000, PHOTO[1000:])
    assert last.status_code == 460
    assert last.json()["error"] == "checksum_mismatch"
    assert api.client.head(location, headers=TUS).headers["Upload-Offset"] == "0"
    # Nothing was attached: the record and the feed look as they did before uploads existed.
    assert "attachments" not in api.client.get(f"/v1/records/{record['id']}").json()["record"]
    assert "attachments" not in api.changes()


def test_another_devices_upload_is_not_found(
    make_api: Callable[..., ServerApi], api: ServerApi
) -> None:
    other = make_api("phone-2")
    record = api.create()
    location = create_upload(api.client, len(PHOTO), file_metadata(record["id"], PHOTO)).headers[
        "Location"
    ]
    assert other.client.head(location, headers=TUS).status_code == 404
    stolen = patch(other.client, location, 0, PHOTO)
    assert (stolen.status_code, stolen.json()) == (404, {"error": "not_found"})
    assert other.client.delete(location, headers=TUS).status_code == 404
    assert api.client.head(location, headers=TUS).headers["Upload-Offset"] == "0"


def test_creation_with_upload_carries_the_first_bytes(api: ServerApi) -> None:
    record = api.create()
    sent = file_metadata(record["id"], PHOTO)
    created = create_upload(api.client, len(PHOTO), sent, body=PHOTO[:4096])
    assert (created.status_code, created.headers["Upload-Offset"]) == (201, "4096")
    whole = file_metadata(record["id"], PHOTO[:4096])
    done = create_upload(api.client, 4096, whole, body=PHOTO[:4096])
    assert done.headers["Upload-Offset"] == "4096"
    read = api.client.get(f"/v1/records/{record['id']}").json()["record"]
    assert [item["id"] for item in read["attachments"]] == [whole["attachment_id"]]


def test_termination_removes_an_unfinished_upload(server: EmbeddedServer, api: ServerApi) -> None:
    record = api.create()
    location = create_upload(api.client, len(PHOTO), file_metadata(record["id"], PHOTO)).headers[
        "Location"
    ]
    patch(api.client, location, 0, PHOTO[:1000])
    partial = server.app.state.server.blobs.partial_path(location.rsplit("/", 1)[-1])
    assert partial.stat().st_size == 1000
    assert api.client.delete(location, headers=TUS).status_code == 204
    assert not partial.exists()
    assert api.client.head(location, headers=TUS).status_code == 404
    finished, _ = upload_whole(api.client, record["id"], PHOTO[:10])
    refused = api.client.delete(finished, headers=TUS)
    assert (refused.status_code, refused.json()) == (409, {"error": "upload_complete"})


def cut_patch(server: EmbeddedServer, token: str, location: str, offset: int, sent: bytes,
              declared: int, **headers: str) -> None:  # fmt: skip
    """A PATCH announcing `declared` bytes whose connection ends after `sent`."""
    address, head = raw_patch(server.base_url, token, location, offset, declared, **headers)
    with socket.create_connection(address) as connection:
        connection.sendall(head + sent)


def offset_when_settled(api: ServerApi, location: str, expected: int) -> int:
    deadline = time.monotonic() + 10
    while True:
        offset = int(api.client.head(location, headers=TUS).headers["Upload-Offset"])
        if offset == expected or time.monotonic() > deadline:
            return offset
        time.sleep(0.05)


def test_a_connection_cut_mid_body_keeps_what_arrived(
    server: EmbeddedServer, api: ServerApi
) -> None:
    record = api.create()
    location = create_upload(api.client, len(PHOTO), file_metadata(record["id"], PHOTO)).headers[
        "Location"
    ]
    cut_patch(server, api.token, location, 0, PHOTO[:120_000], declared=len(PHOTO))
    assert offset_when_settled(api, location, 120_000) == 120_000
    assert patch(api.client, location, 120_000, PHOTO[120_000:]).status_code == 204
    attachment = api.client.get(f"/v1/records/{record['id']}").json()["record"]["attachments"][0]
    assert api.client.get(f"/v1/attachments/{attachment['id']}").content == PHOTO


def test_a_cut_chunk_with_a_checksum_is_dropped(server: EmbeddedServer, api: ServerApi) -> None:
    """What arrived of a checksummed chunk cannot be checked, so none of it counts."""
    record = api.create()
    location = create_upload(api.client, len(PHOTO), file_metadata(record["id"], PHOTO)).headers[
        "Location"
    ]
    assert patch(api.client, location, 0, PHOTO[:1000]).status_code == 204
    chunk = PHOTO[1000:200_000]
    cut_patch(server, api.token, location, 1000, chunk[:50_000], declared=len(chunk),
              **{"Upload-Checksum": chunk_checksum(chunk)})  # fmt: skip
    # The lock is free again once the server has dealt with the cut request.
    deadline = time.monotonic() + 10
    while (answer := patch(api.client, location, 1000, chunk)).status_code == 423:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert (answer.status_code, answer.headers["Upload-Offset"]) == (204, "200000")


def test_an_empty_file_is_complete_at_creation(api: ServerApi) -> None:
    record = api.create()
    empty = file_metadata(record["id"], b"", content_type="text/plain", filename="blank.txt")
    created = create_upload(api.client, 0, empty)
    assert (created.status_code, created.headers["Upload-Offset"]) == (201, "0")
    assert "Upload-Expires" not in created.headers  # nothing left to expire
    [attached] = api.client.get(f"/v1/records/{record['id']}").json()["record"]["attachments"]
    assert (attached["id"], attached["size"]) == (empty["attachment_id"], 0)
    assert api.client.get(f"/v1/attachments/{attached['id']}").content == b""
    wrong = file_metadata(record["id"], b"", sha256="0" * 64, content_type="text/plain")
    refused = create_upload(api.client, 0, wrong)
    assert (refused.status_code, refused.json()["error"]) == (460, "checksum_mismatch")


def test_a_large_chunk_is_written_back_while_it_arrives(
    api: ServerApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writeback starts every few bytes of a body, in order, so the fsync that ends the chunk
    waits for its tail only; the stored file is the same."""
    started: list[tuple[int, int]] = []
    start_writeback = receive._start_writeback

    def recorded(fd: int, start: int, length: int) -> None:
        started.append((start, length))
        start_writeback(fd, start, length)

    monkeypatch.setattr(receive, "_WRITEBACK_BYTES", 64 * 1024)
    monkeypatch.setattr(receive, "_start_writeback", recorded)
    record = api.create()
    location = create_upload(api.client, len(PHOTO), file_metadata(record["id"], PHOTO)).headers[
        "Location"
    ]
    assert patch(api.client, location, 0, PHOTO[:1000]).status_code == 204
    assert started == [], "a body smaller than the step: its fsync alone"
    answer = patch(api.client, location, 1000, PHOTO[1000:], **{
        "Upload-Checksum": chunk_checksum(PHOTO[1000:])})  # fmt: skip
    assert answer.status_code == 204
    assert started[0][0] == 1000, "from where the chunk began"
    assert all(length >= 64 * 1024 for _, length in started)
    assert all(a + n == b for (a, n), (b, _) in zip(started, started[1:], strict=False)), started
    assert len(PHOTO) - (started[-1][0] + started[-1][1]) < 64 * 1024, "all but the tail"
    attachment = api.client.get(f"/v1/records/{record['id']}").json()["record"]["attachments"][0]
    assert api.client.get(f"/v1/attachments/{attachment['id']}").content == PHOTO
