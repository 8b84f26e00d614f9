"""Interoperability through cut links: tus-js-client 4 (Node, from npm: tests/interop) and
tuspy upload to the real server through a proxy that cuts PATCHes mid-body, and resume by
their own retries (HEAD, then PATCH from the offset it answers). The file comes out whole,
and after each cut the client sends again at most 64 KiB of what the server had stored.

Two kinds of cut: the server's side closed at once (it sees the end), or left open and silent
(a link that died without a word: only the client's HEAD makes the server let go). Chunked
uploads (256 KiB PATCHes) and one-PATCH uploads (the whole file in one body)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from tusclient.client import TusClient
from tusclient.uploader import Uploader

from server.embedded import EmbeddedServer
from tests.support.api import ServerApi
from tests.support.cut_proxy import CutProxy, Seen
from tests.support.tus import file_metadata

INTEROP = Path(__file__).parents[1] / "interop"
FILE = os.urandom(3 * 1024 * 1024 + 12_345)
CHUNK = 256 * 1024
#: What a client may send again after a cut, beyond what the server had not stored.
RESENT_BOUND = 64 * 1024
#: PATCH number (from 0) -> body bytes that reach the server before its cut.
CUTS = {
    "chunked": {1: 100_000, 4: 200_000},
    "one-patch": {0: 1_000_000, 1: 700_000},
}


@dataclass(frozen=True)
class Resent:
    """After one cut: what the server had stored of the cut PATCH's file range, and where the
    client resumed."""

    stored: int
    resumed: int

    @property
    def again(self) -> int:
        return self.stored - self.resumed


def resends(requests: list[Seen]) -> list[Resent]:
    """For each cut PATCH, where the next PATCH resumed."""
    patches = [seen for seen in requests if seen.method == "PATCH"]
    found = []
    for cut, following in zip(patches, patches[1:], strict=False):
        if cut.cut:
            assert cut.upload_offset is not None
            assert following.upload_offset is not None
            found.append(Resent(cut.upload_offset + cut.forwarded, following.upload_offset))
    return found


def tus_js_upload(endpoint: str, token: str, path: Path, metadata: dict[str, str],
                  chunk: int) -> list[dict[str, object]]:  # fmt: skip
    node = shutil.which("node")
    assert node, "Node.js is needed (scripts/system-deps.sh installs it)"
    assert (INTEROP / "node_modules" / "tus-js-client").is_dir(), (
        "tus-js-client is missing: `make test` runs npm ci in tests/interop"
    )
    result = subprocess.run(
        [node, str(INTEROP / "tus_upload.cjs"), endpoint, str(path), token,
         json.dumps(metadata), str(chunk)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    replies = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert result.returncode == 0, (replies, result.stderr)
    return replies


def tuspy_upload(endpoint: str, token: str, path: Path, metadata: dict[str, str],
                 chunk: int) -> None:  # fmt: skip
    client = TusClient(endpoint, headers={"Authorization": f"Bearer {token}"})
    with path.open("rb") as stream:
        uploader = Uploader(
            file_stream=stream, client=client, chunk_size=chunk or len(FILE),
            metadata=metadata, retries=8, retry_delay=0.1,
        )  # fmt: skip
        uploader.upload()


@pytest.mark.parametrize("link", ["closed", "silent"])
@pytest.mark.parametrize("shape", ["chunked", "one-patch"])
@pytest.mark.parametrize("client", ["tus-js-client", "tuspy"])
def test_a_tus_client_resumes_through_cuts_without_resending_what_was_stored(
    server: EmbeddedServer, api: ServerApi, tmp_path: Path, client: str, shape: str, link: str
) -> None:
    record = api.create()
    path = tmp_path / "pump.jpg"
    path.write_bytes(FILE)
    metadata = file_metadata(record["id"], FILE, filename="pump.jpg")
    port = int(server.base_url.rsplit(":", 1)[1])
    proxy = CutProxy(("127.0.0.1", port), CUTS[shape], silent=link == "silent").start()
    chunk = CHUNK if shape == "chunked" else 0
    try:
        endpoint = f"{proxy.base_url}/v1/uploads"
        if client == "tus-js-client":
            tus_js_upload(endpoint, api.token, path, metadata, chunk)
        else:
            tuspy_upload(endpoint, api.token, path, metadata, chunk)
    finally:
        proxy.stop()
    after = resends(proxy.requests)
    assert len(after) == len(CUTS[shape]), proxy.requests
    sent = sum(seen.body_read for seen in proxy.requests)
    print(
        f"\n{client} {shape} {link}: {len(after)} cuts; sent again beyond the unstored:"
        f" {[resent.again for resent in after]} bytes; body bytes through the proxy"
        f" {sent} for a file of {len(FILE)} (+{sent - len(FILE)})"
    )
    for resent in after:
        assert 0 <= resent.again <= RESENT_BOUND, after
    record_now = api.client.get(f"/v1/records/{record['id']}").json()["record"]
    [attached] = record_now["attachments"]
    assert attached["sha256"] == hashlib.sha256(FILE).hexdigest()
    assert api.client.get(f"/v1/attachments/{attached['id']}").content == FILE
