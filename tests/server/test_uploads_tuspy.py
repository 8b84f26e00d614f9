"""Interoperability: tuspy, the reference tus client for Python, uploads to the real server on
loopback, and resumes from the server's offset after its connection is cut mid-chunk."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest
from tusclient.client import TusClient
from tusclient.exceptions import TusCommunicationError
from tusclient.uploader import Uploader

from server.embedded import EmbeddedServer
from tests.chaos.plans import PASS, ScriptedPlan, cut_body
from tests.chaos.proxy import FaultProxy
from tests.support.api import ServerApi
from tests.support.tus import TUS, file_metadata

CHUNK = 128 * 1024
CUT = 50_000


class Sha256Uploader(Uploader):
    """tuspy's uploader with the checksum our server speaks (tuspy defaults to sha1)."""

    CHECKSUM_ALGORITHM_PAIR = ("sha256", hashlib.sha256)


def attached_bytes(api: ServerApi, entity_id: str) -> tuple[list[str], bytes]:
    record = api.client.get(f"/v1/records/{entity_id}").json()["record"]
    names = [attachment["filename"] for attachment in record["attachments"]]
    content = api.client.get(f"/v1/attachments/{record['attachments'][0]['id']}").content
    return names, content


def settled_offset(api: ServerApi, url: str) -> int:
    """The upload's offset once the server has dealt with the cut request (it notices the
    closed connection a moment after the client does): the same answer twice, 0.3 s apart."""
    deadline = time.monotonic() + 10
    last = -1
    while time.monotonic() < deadline:
        offset = int(api.client.head(url, headers=TUS).headers["Upload-Offset"])
        if offset == last:
            return offset
        last = offset
        time.sleep(0.3)
    raise AssertionError("the offset never settled")


@pytest.mark.parametrize("checksums", [False, True], ids=["plain", "sha256-checksums"])
def test_tuspy_uploads_and_resumes_after_a_cut(
    server: EmbeddedServer, api: ServerApi, tmp_path: Path, checksums: bool
) -> None:
    record = api.create()
    data = os.urandom(5 * CHUNK + 77)
    path = tmp_path / "gasket.jpg"
    path.write_bytes(data)
    port = int(server.base_url.rsplit(":", 1)[1])
    # The second request to an upload's URL (tuspy's second PATCH) is cut after CUT body bytes.
    plan = ScriptedPlan([PASS, cut_body(CUT)], paths="/v1/uploads/")
    proxy = FaultProxy(("127.0.0.1", port), plan).start()
    try:
        client = TusClient(
            f"{proxy.base_url}/v1/uploads", headers={"Authorization": f"Bearer {api.token}"}
        )
        metadata = file_metadata(record["id"], data, filename="gasket.jpg")
        options = {"chunk_size": CHUNK, "metadata": metadata, "upload_checksum": checksums}
        with path.open("rb") as stream:
            first = Sha256Uploader(file_stream=stream, client=client, **options)
            with pytest.raises(TusCommunicationError):
                first.upload()
        assert first.offset == CHUNK
        held = settled_offset(api, first.url)
        # What arrived of the cut chunk is kept, unless it came with a checksum: a part of a
        # chunk cannot be checked, so none of it counts.
        assert held == (CHUNK if checksums else CHUNK + CUT)
        with path.open("rb") as stream:
            resumed = Sha256Uploader(file_stream=stream, client=client, url=first.url, **options)
            assert resumed.offset == held  # tuspy asked the server (HEAD) where to go on
            resumed.upload()
    finally:
        proxy.stop()
    assert attached_bytes(api, record["id"]) == (["gasket.jpg"], data)
