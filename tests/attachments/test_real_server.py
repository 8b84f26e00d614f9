"""Attachments between two devices through the real server on loopback (tus, feed, removal)."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import httpx
import pytest

from app.attachments import Attachments
from app.events import UploadProgress
from app.states import AttachmentState
from app.store.store import Store
from server.embedded import EmbeddedServer
from tests.sync.sync_support import (
    close_engine_thread,
    make_engine,
    running,
    sync_until_idle,
    wait_until,
)

MIB = 1 << 20
pytest.importorskip("PIL")


def jpeg(path: Path, size: tuple[int, int] = (1200, 900)) -> Path:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", size, (200, 80, 40)).save(out, "JPEG", quality=95)
    path.write_bytes(out.getvalue() + b"\0" * (3 * MIB))  # a big photo, still a JPEG
    return path


@pytest.fixture
def crew(server: EmbeddedServer) -> tuple[str, str]:
    """The tokens of one person's two phones (``store``'s, then ``phone_b``'s): a work order
    either creates is in both scopes."""
    return server.add_device("phone-a", user="crew"), server.add_device("phone-b", user="crew")


def served(server: EmbeddedServer, token: str, attachment_id: str) -> httpx.Response:
    with httpx.Client(base_url=server.base_url) as client:
        return client.get(
            f"/v1/attachments/{attachment_id}", headers={"Authorization": f"Bearer {token}"}
        )


async def test_a_photo_reaches_the_server_and_a_colleague_sees_it(
    tmp_path: Path, store: Store, server: EmbeddedServer, phone_b: Store, crew: tuple[str, str]
) -> None:
    token_a, token_b = crew
    entity = store.record_edit("create", None, {"title": "Broken meter"}).entity_id
    source = jpeg(tmp_path / "meter.jpg")
    view = Attachments(store).attach(entity, source)

    await sync_until_idle(store, server.base_url, token_a, upload_chunk_max_bytes=MIB)

    mine = Attachments(store).get(view.id)
    assert mine is not None
    assert mine.state is AttachmentState.UPLOADED
    reply = served(server, token_b, view.id)
    assert reply.status_code == 200
    assert hashlib.sha256(reply.content).hexdigest() == view.sha256
    assert reply.headers["etag"] == f'"{view.sha256}"'

    await sync_until_idle(phone_b, server.base_url, token_b)
    [theirs] = Attachments(phone_b).list_for(entity)
    assert (theirs.id, theirs.mine, theirs.state) == (view.id, False, AttachmentState.UPLOADED)
    assert theirs.created_by == "phone-a"
    assert theirs.local_path is None
    viewer = make_engine(phone_b, server.base_url, token_b)
    try:
        thumbnail = await viewer.uploader.thumbnail(view.id)
        assert await viewer.uploader.thumbnail(view.id) == thumbnail, "cached"
    finally:
        await viewer.client.aclose()
        close_engine_thread(viewer)
    assert thumbnail is not None
    from PIL import Image

    with Image.open(thumbnail) as image:
        assert max(image.size) <= 256


async def test_a_removal_reaches_the_server_and_the_colleague(
    tmp_path: Path, store: Store, server: EmbeddedServer, phone_b: Store, crew: tuple[str, str]
) -> None:
    token_a, token_b = crew
    entity = store.record_edit("create", None, {"title": "Broken meter"}).entity_id
    view = Attachments(store).attach(entity, jpeg(tmp_path / "meter.jpg"))
    await sync_until_idle(store, server.base_url, token_a)
    await sync_until_idle(phone_b, server.base_url, token_b)
    assert [v.id for v in Attachments(phone_b).list_for(entity)] == [view.id]

    Attachments(store).detach(view.id)
    await sync_until_idle(store, server.base_url, token_a)
    assert served(server, token_a, view.id).status_code == 404
    await sync_until_idle(phone_b, server.base_url, token_b)
    assert Attachments(phone_b).list_for(entity) == []


async def test_a_stopped_upload_resumes_from_the_servers_offset_after_a_restart(
    tmp_path: Path, store: Store, server: EmbeddedServer
) -> None:
    token = server.add_device("phone-a")
    entity = store.record_edit("create", None, {"title": "Broken meter"}).entity_id
    source = tmp_path / "site-survey.pdf"  # a type the server takes by default
    source.write_bytes(bytes(range(256)) * (24 * 4096))  # 24 MiB
    view = Attachments(store).attach(entity, source)
    chunks: list[int] = []
    first = make_engine(store, server.base_url, token, upload_chunk_max_bytes=MIB)
    first.events.subscribe(
        lambda event: chunks.append(event.offset) if isinstance(event, UploadProgress) else None
    )
    async with running(first) as runner:
        await wait_until(first, runner, lambda: len(chunks) >= 4)
    # Stopped (as an app closed) with the upload part way.
    halfway = Attachments(store).get(view.id)
    assert halfway is not None
    assert halfway.state is AttachmentState.UPLOADING
    assert 0 < halfway.offset < view.size

    again = make_engine(store, server.base_url, token, upload_chunk_max_bytes=MIB)
    try:
        assert await again.run_until_idle(30.0)
        resent = again.uploader.bytes_sent - (view.size - halfway.offset)
    finally:
        close_engine_thread(again)
    assert 0 <= resent <= MIB, "at most one chunk sent again"
    reply = served(server, token, view.id)
    assert hashlib.sha256(reply.content).hexdigest() == view.sha256
