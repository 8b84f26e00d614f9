"""Uploads inside the sync engine: after the create, behind edits, finished by until-idle."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from app.attachments import Attachments
from app.states import AttachmentState
from app.store.store import Store
from tests.attachments.conftest import photo
from tests.attachments.fake_tus import FakeTus
from tests.sync.fake_server import FakeServer
from tests.sync.sync_support import close_engine_thread, make_engine, running, wait_until

MIB = 1 << 20
URL = "http://server.test"


class Both:
    """One server: tus and attachments to the tus fake, the rest to the sync fake."""

    def __init__(self, tus: FakeTus) -> None:
        self.tus = tus
        self.sync = FakeServer()
        self.order: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.order.append(f"{request.method} {path.split('/')[2] if path.count('/') > 1 else path}")
        if path.startswith(("/v1/uploads", "/v1/attachments")):
            return self.tus.handle(request)
        return self.sync.handle(request)


@pytest.fixture
def both(tmp_path: Path) -> Both:
    folder = tmp_path / "server"
    folder.mkdir()
    return Both(FakeTus(folder))


async def test_until_idle_sends_the_create_then_finishes_the_upload(
    tmp_path: Path, store: Store, attachments: Attachments, both: Both
) -> None:
    entity = store.record_edit("create", None, {"title": "Leaking valve"}).entity_id
    source = photo(tmp_path, size=3 * MIB)
    view = attachments.attach(entity, source)
    engine = make_engine(store, URL, "token", transport=httpx.MockTransport(both.handle))
    try:
        assert await engine.run_until_idle(20.0)
    finally:
        close_engine_thread(engine)
    assert both.tus.completed() == {view.id: source.read_bytes()}
    sent = [line for line in both.order if line.split()[1] in ("uploads", "mutations")]
    assert sent[:2] == ["POST mutations", "POST uploads"], "the work order exists first"


async def test_an_edit_saved_during_an_upload_waits_one_chunk_at_most(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, both: Both
) -> None:
    view = attachments.attach(acked, photo(tmp_path, size=6 * MIB))
    engine = make_engine(
        store, URL, "token", transport=httpx.MockTransport(both.handle), upload_chunk_max_bytes=MIB
    )
    patches = [0]

    def edit_during_the_second_chunk(request: httpx.Request) -> None:
        if request.method == "PATCH":
            patches[0] += 1
            if patches[0] == 2:
                store.record_edit("update", acked, {"notes": "valve replaced"})
                engine.wake()

    both.tus.faults.append(edit_during_the_second_chunk)  # type: ignore[arg-type]
    try:
        assert await engine.run_until_idle(20.0)
    finally:
        close_engine_thread(engine)
    sent = [line for line in both.order if line.split()[1] in ("uploads", "mutations")]
    second_patch = [n for n, line in enumerate(sent) if line == "PATCH uploads"][1]
    assert sent[second_patch + 1] == "POST mutations", sent
    assert both.sync.bodies()[-1]["fields"] == {"notes": "valve replaced"}
    done = Attachments(store).get(view.id)
    assert done is not None
    assert done.state is AttachmentState.UPLOADED


async def test_an_upload_waits_for_an_unmetered_link_when_metered_sync_is_off(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, both: Both
) -> None:
    view = attachments.attach(acked, photo(tmp_path, size=6 * MIB))
    store.db.execute_sql(
        "INSERT INTO settings (key, value) VALUES ('ui.sync_on_metered', '0')"
    )  # the person's setting, as the app saves it
    waiting = attachments.get(view.id)
    assert waiting is not None
    assert waiting.waits_for_unmetered, "large, and metered sync off: the UI says so"
    engine = make_engine(
        store, URL, "token", transport=httpx.MockTransport(both.handle), sync_on_metered=False
    )
    engine.set_os_hint(True, metered=True)
    async with running(engine) as runner:
        await wait_until(engine, runner, lambda: engine.status.paused)
        await asyncio.sleep(0.3)
        assert [line for line in both.order if "uploads" in line] == [], "nothing on metered"
        engine.set_os_hint(True, metered=False)
        await wait_until(engine, runner, lambda: view.id in both.tus.completed(), within_s=15.0)
    assert Attachments(store).get(view.id).state is AttachmentState.UPLOADED  # type: ignore[union-attr]
