"""A device database of the release before attachments, with edits queued, upgraded."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.attachments import Attachments
from app.states import AttachmentState
from app.store import migrations
from app.store.store import Store
from server.embedded import EmbeddedServer
from tests.attachments.conftest import photo
from tests.store.store_support import at_schema
from tests.support.api import ServerApi
from tests.sync.sync_support import make_store, sync_until_idle

BEFORE = 6  # the schema before attachments


def queued_before_attachments(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Edits queued by the release that knew migrations up to ``BEFORE``."""
    with monkeypatch.context() as old:
        at_schema(old, BEFORE)
        with Store(data_dir) as store:
            ids = [
                store.record_edit("create", None, {"title": f"Order {n}"}).entity_id
                for n in range(5)
            ]
            store.record_edit("update", ids[0], {"notes": "queued before the upgrade"})
            tables = store.db.get_tables()
            assert "attachments" not in tables
    return ids


async def test_queued_edits_survive_the_upgrade_and_are_delivered_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: EmbeddedServer
) -> None:
    data_dir = tmp_path / "device"
    ids = queued_before_attachments(data_dir, monkeypatch)
    with make_store(data_dir) as store:
        sql = store.db.execute_sql
        assert sql("SELECT MAX(version) FROM schema_version").fetchone() == (
            migrations.LATEST_VERSION,
        )
        jobs = sql("SELECT status, waits_for, topic FROM jobs ORDER BY id").fetchall()
        assert jobs == [("pending", None, "work_orders")] * 6, "every queued edit is kept"
        token = server.add_device("phone-a")
        await sync_until_idle(store, server.base_url, token)
        assert sql("SELECT status, COUNT(*) FROM jobs GROUP BY status").fetchall() == [("done", 6)]
        # The upgraded device takes attachments.
        view = Attachments(store).attach(ids[1], photo(tmp_path))
        assert view.state is AttachmentState.WAITING
    api = ServerApi(server.base_url, token)
    try:
        by_id = {record["id"]: record for record in api.all_changes()}
    finally:
        api.close()
    assert set(by_id) == set(ids)
    assert by_id[ids[0]]["notes"] == "queued before the upgrade"
    assert by_id[ids[0]]["version"] == 2
