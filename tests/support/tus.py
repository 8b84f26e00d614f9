"""Speaking tus to the server in tests: `Upload-Metadata`, creating an upload, sending chunks."""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any

import httpx

__all__ = [
    "TUS",
    "chunk_checksum",
    "create_upload",
    "file_metadata",
    "metadata",
    "patch",
    "raw_patch",
    "upload_whole",
]

TUS = {"Tus-Resumable": "1.0.0"}
OFFSET_STREAM = "application/offset+octet-stream"


def metadata(**values: str) -> str:
    return ",".join(
        f"{key} {base64.b64encode(value.encode()).decode()}" for key, value in values.items()
    )


def file_metadata(
    entity_id: str,
    data: bytes,
    *,
    attachment_id: str | None = None,
    filename: str = "meter.jpg",
    content_type: str = "image/jpeg",
    sha256: str | None = None,
) -> dict[str, str]:
    return {
        "attachment_id": attachment_id or str(uuid.uuid4()),
        "entity_id": entity_id,
        "filename": filename,
        "content_type": content_type,
        "sha256": sha256 or hashlib.sha256(data).hexdigest(),
    }


def create_upload(
    client: httpx.Client,
    length: int,
    values: dict[str, str],
    *,
    body: bytes | None = None,
    **headers: str,
) -> httpx.Response:
    sent = {**TUS, "Upload-Length": str(length), "Upload-Metadata": metadata(**values), **headers}
    if body is not None:
        sent["Content-Type"] = OFFSET_STREAM
    return client.post("/v1/uploads", headers=sent, content=body)


def chunk_checksum(data: bytes) -> str:
    return "sha256 " + base64.b64encode(hashlib.sha256(data).digest()).decode()


def patch(
    client: httpx.Client, location: str, offset: int, data: bytes, **headers: Any
) -> httpx.Response:
    sent = {**TUS, "Upload-Offset": str(offset), "Content-Type": OFFSET_STREAM, **headers}
    return client.patch(location, headers=sent, content=data)


def upload_whole(
    client: httpx.Client, entity_id: str, data: bytes, chunk: int = 64 * 1024, **values: Any
) -> tuple[str, dict[str, str]]:
    """Upload `data` in chunks; returns (Location, the metadata sent)."""
    sent = file_metadata(entity_id, data, **values)
    created = create_upload(client, len(data), sent)
    assert created.status_code == 201, created.text
    location = created.headers["Location"]
    offset = 0
    while offset < len(data):
        answer = patch(client, location, offset, data[offset : offset + chunk])
        assert answer.status_code == 204, answer.text
        offset = int(answer.headers["Upload-Offset"])
    return location, sent


def raw_patch(
    base_url: str, token: str, location: str, offset: int, declared: int, **headers: str
) -> tuple[tuple[str, int], bytes]:
    """The address and the head of a PATCH announcing `declared` body bytes, for tests that
    send (part of) the body over a socket of their own and cut it."""
    host, port = base_url.removeprefix("http://").split(":")
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    head = (
        f"PATCH {location} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
        f"Tus-Resumable: 1.0.0\r\nUpload-Offset: {offset}\r\n"
        f"Content-Type: {OFFSET_STREAM}\r\nContent-Length: {declared}\r\n{extra}\r\n"
    )
    return (host, int(port)), head.encode()
