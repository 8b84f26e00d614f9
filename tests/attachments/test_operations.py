"""The UI's attachment operations: each runs on the executor and publishes one OpChanges."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.attachments import AttachmentOperations
from app.events import Event, EventBus, OpChanges
from app.executor import StoreExecutor
from app.states import AttachmentState
from app.store.errors import InvalidEditError
from app.store.store import Store
from tests.attachments.conftest import photo


async def test_attach_and_detach_publish_what_they_changed(
    tmp_path: Path, store: Store, work_order: str
) -> None:
    events = EventBus()
    seen: list[Event] = []
    events.subscribe(seen.append)
    executor = StoreExecutor()
    operations = AttachmentOperations(store, executor, events)
    try:
        view = await operations.attach(work_order, photo(tmp_path), "gasket.jpg")
        assert view.state is AttachmentState.WAITING
        assert [v.id for v in await operations.list_for(work_order)] == [view.id]
        with pytest.raises(InvalidEditError, match="has not failed"):
            await operations.retry_upload(view.id)
        await operations.detach(view.id)
        assert await operations.list_for(work_order) == []
    finally:
        await executor.run(store.db.close)
        executor.shutdown()
    changes = OpChanges(frozenset({work_order}), queue=True, attachments=True)
    assert seen == [changes, changes], "one per write; a refused retry changes nothing"
