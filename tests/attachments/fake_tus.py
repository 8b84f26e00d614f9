"""A tus 1.0.0 server behind `httpx.MockTransport` (no sockets), for the uploader's unit tests.

It keeps each upload's bytes in a file, checks each chunk's checksum (if it has one) and the
whole file's sha256 on the last byte, and lets a test plan faults: cut a PATCH after n bytes
(the server keeps them, the client sees a reset), apply a PATCH and lose its reply, or answer
a status.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from app.sync.tus import file_sha256

__all__ = ["FakeTus", "Upload"]


@dataclass
class Upload:
    id: str
    length: int
    metadata: dict[str, str]
    path: Path
    offset: int = 0
    complete: bool = False


@dataclass
class FakeTus:
    folder: Path
    uploads: dict[str, Upload] = field(default_factory=dict)
    by_attachment: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    #: (method, path, Upload-Offset or None, body bytes) of every request.
    requests: list[tuple[str, str, str | None, int]] = field(default_factory=list)
    #: Whether each PATCH carried `Upload-Checksum`.
    checksummed: list[bool] = field(default_factory=list)
    #: Planned answers: called with the request, return a Response/exception or None (pass).
    faults: list[Callable[[httpx.Request], httpx.Response | Exception | None]] = field(
        default_factory=list
    )
    #: Work orders the server knows (None: all).
    known: set[str] | None = None

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def body_bytes(self, method: str = "PATCH") -> int:
        return sum(size for m, _, _, size in self.requests if m == method)

    def completed(self) -> dict[str, bytes]:
        """attachment_id -> the bytes of each completed upload."""
        return {
            up.metadata["attachment_id"]: up.path.read_bytes()
            for up in self.uploads.values()
            if up.complete
        }

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = request.content
        self.requests.append(
            (request.method, request.url.path, request.headers.get("upload-offset"), len(body))
        )
        assert request.headers["authorization"].startswith("Bearer ")
        for fault in list(self.faults):
            answer = fault(request)
            if isinstance(answer, Exception):
                raise answer
            if answer is not None:
                return answer
        return self.answer(request, body)

    def answer(self, request: httpx.Request, body: bytes) -> httpx.Response:
        path, method = request.url.path, request.method
        if path.startswith("/v1/attachments/") and method == "DELETE":
            attachment_id = path.rsplit("/", 1)[1]
            if attachment_id not in self.by_attachment:
                return httpx.Response(404, json={"error": "not_found"})
            self.removed.append(attachment_id)
            return httpx.Response(200, json={"attachment": {"id": attachment_id}})
        assert request.headers.get("tus-resumable") == "1.0.0"
        if path == "/v1/uploads" and method == "POST":
            return self.create(request)
        upload = self.uploads.get(path.rsplit("/", 1)[1])
        if upload is None:
            return httpx.Response(404)
        if method == "HEAD":
            return httpx.Response(
                200,
                headers={
                    "Upload-Offset": str(upload.offset),
                    "Upload-Length": str(upload.length),
                    "Cache-Control": "no-store",
                },
            )
        if method == "DELETE":
            del self.uploads[upload.id]
            return httpx.Response(204)
        assert method == "PATCH"
        return self.patch(request, upload, body)

    def create(self, request: httpx.Request) -> httpx.Response:
        metadata = {}
        for pair in request.headers["upload-metadata"].split(","):
            key, value = pair.split(" ")
            metadata[key] = base64.b64decode(value).decode()
        if self.known is not None and metadata["entity_id"] not in self.known:
            return httpx.Response(404, json={"error": "not_found"})
        length = int(request.headers["upload-length"])
        existing = self.by_attachment.get(metadata["attachment_id"])
        if existing is not None and existing in self.uploads:
            upload = self.uploads[existing]
            if upload.length != length or upload.metadata["sha256"] != metadata["sha256"]:
                return httpx.Response(422, json={"error": "idempotency_key_reused"})
        else:
            upload_id = uuid.uuid4().hex
            upload = Upload(upload_id, length, metadata, self.folder / upload_id)
            upload.path.write_bytes(b"")
            self.uploads[upload_id] = upload
            self.by_attachment[metadata["attachment_id"]] = upload_id
        return httpx.Response(
            201,
            headers={
                "Location": f"http://server.test/v1/uploads/{upload.id}",
                "Upload-Offset": str(upload.offset),
            },
        )

    def patch(self, request: httpx.Request, upload: Upload, body: bytes) -> httpx.Response:
        assert request.headers["content-type"] == "application/offset+octet-stream"
        if int(request.headers["upload-offset"]) != upload.offset:
            return httpx.Response(409, json={"error": "offset_mismatch"})
        checksum = request.headers.get("upload-checksum")
        self.checksummed.append(checksum is not None)
        if checksum is not None:
            algorithm, _, expected = checksum.partition(" ")
            assert algorithm == "sha256"
            if base64.b64encode(hashlib.sha256(body).digest()).decode() != expected:
                return httpx.Response(460)
        self.keep(upload, body)
        if upload.offset == upload.length:
            whole = file_sha256(upload.path)
            if whole != upload.metadata["sha256"]:
                upload.offset = 0
                upload.path.write_bytes(b"")
                return httpx.Response(460)
            upload.complete = True
        return httpx.Response(204, headers={"Upload-Offset": str(upload.offset)})

    def keep(self, upload: Upload, data: bytes) -> None:
        with upload.path.open("ab") as out:
            out.write(data)
        upload.offset += len(data)


def cut_patch_after(kept: int, *, times: int = 1) -> Callable[[FakeTus], Callable[..., object]]:
    """A fault: the next PATCH keeps ``kept`` bytes on the server, the client sees a reset."""

    def plan(server: FakeTus) -> Callable[[httpx.Request], Exception | None]:
        left = [times]

        def fault(request: httpx.Request) -> Exception | None:
            if request.method != "PATCH" or left[0] == 0:
                return None
            upload = server.uploads[request.url.path.rsplit("/", 1)[1]]
            if int(request.headers["upload-offset"]) != upload.offset:
                return None
            left[0] -= 1
            server.keep(upload, request.content[:kept])
            return httpx.ReadError("connection reset by peer", request=request)

        return fault

    return plan


def lose_reply_of_last_patch(server: FakeTus) -> Callable[[httpx.Request], Exception | None]:
    """A fault: the PATCH that completes an upload is applied, its reply never arrives."""
    done = [False]

    def fault(request: httpx.Request) -> Exception | None:
        if request.method != "PATCH" or done[0]:
            return None
        upload = server.uploads[request.url.path.rsplit("/", 1)[1]]
        if int(request.headers["upload-offset"]) + len(request.content) < upload.length:
            return None
        done[0] = True
        server.patch(request, upload, request.content)
        return httpx.ReadTimeout("the reply was lost", request=request)

    return fault
