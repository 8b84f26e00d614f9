"""A pull that brings a colleague's attachment (or its removal) names the work order in the
change event the core publishes, though the work order's version did not move: the editor's
strip and the list row repaint from that (through the real server on loopback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.attachments import Attachments
from app.events import RecordsChanged
from app.store.store import Store
from server.embedded import EmbeddedServer
from tests.attachments.test_real_server import jpeg
from tests.sync.sync_support import close_engine_thread, make_engine, sync_until_idle

pytest.importorskip("PIL")


async def changes_pulled(store: Store, server: EmbeddedServer, token: str) -> set[str]:
    """Sync until idle; the work orders the published RecordsChanged events named."""
    engine = make_engine(store, server.base_url, token)
    named: set[str] = set()
    engine.events.subscribe(
        lambda event: named.update(event.entity_ids) if isinstance(event, RecordsChanged) else None
    )
    try:
        assert await engine.run_until_idle(15.0), engine.last_error
    finally:
        close_engine_thread(engine)
    return named


async def test_a_colleagues_photo_and_its_removal_name_their_work_order(
    tmp_path: Path, store: Store, server: EmbeddedServer, phone_b: Store
) -> None:
    token_a = server.add_device("phone-a", user="crew")
    token_b = server.add_device("phone-b", user="crew")
    entity = store.record_edit("create", None, {"title": "Broken meter"}).entity_id
    await sync_until_idle(store, server.base_url, token_a)
    assert entity in await changes_pulled(phone_b, server, token_b)
    assert await changes_pulled(phone_b, server, token_b) == set(), "nothing new: no event"

    view = Attachments(store).attach(entity, jpeg(tmp_path / "meter.jpg"))
    await sync_until_idle(store, server.base_url, token_a)
    assert store.cache.get(entity)["server_version"] == 1, "the photo left the version alone"

    assert await changes_pulled(phone_b, server, token_b) == {entity}
    assert [v.id for v in Attachments(phone_b).list_for(entity)] == [view.id]

    Attachments(store).detach(view.id)
    await sync_until_idle(store, server.base_url, token_a)
    assert await changes_pulled(phone_b, server, token_b) == {entity}
    assert Attachments(phone_b).list_for(entity) == []
