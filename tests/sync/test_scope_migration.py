"""The device upgrade of issue 16 with a full queue: every edit queued before migration 6 is
delivered after it, to the real server (on SQLite and on PostgreSQL), unchanged and once."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.records import validate_create
from app.store import migrations
from app.store.store import TOPIC_WORK_ORDERS, Store
from server.embedded import EmbeddedServer
from tests.store.store_support import at_schema
from tests.support.api import ServerApi
from tests.sync.sync_support import job_rows, make_store, sync_until_idle

SCOPE_VERSION = 6


@pytest.fixture
def server(server_on_each_backend: EmbeddedServer) -> EmbeddedServer:
    return server_on_each_backend


def old_update(store: Store, entity_id: str, fields: dict[str, Any], base: int | None) -> int:
    """An update as the release before saved it (today's `record_edit` reads columns an old
    schema lacks): the visible fields and the job, in one transaction."""
    with store.db.atomic():
        store.cache.apply_local(entity_id, fields, time.time())
        return store.queue.enqueue(
            TOPIC_WORK_ORDERS, {"op": "update", "fields": fields}, entity_id, base_version=base
        )


def old_create(store: Store, fields: dict[str, Any]) -> str:
    """A create as the release before saved it: every field it knew, no `team`."""
    entity_id = str(uuid.uuid4())
    known = {k: v for k, v in validate_create(fields).items() if k != "team"}
    with store.db.atomic():
        store.cache.insert_local(entity_id, known, time.time())
        store.queue.enqueue(
            TOPIC_WORK_ORDERS, {"op": "create", "fields": known}, entity_id, new_entity=True
        )
    return entity_id


def old_server_row(store: Store, record: dict[str, Any]) -> None:
    """A work order the release before had pulled, as its cache held it."""
    store.db.execute_sql(
        "INSERT INTO work_orders (id, title, site, status, priority, notes, assignee, due_date, "
        "deleted, server_version, etag, server_snapshot, origin, local_updated_at, "
        "last_synced_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, 'server', ?, ?)",
        (
            record["id"],
            record["title"],
            record["site"] or "",
            record["status"],
            record["priority"],
            record["notes"] or "",
            record["assignee"] or "",
            record["due_date"],
            record["version"],
            f'"{record["version"]}"',
            json.dumps(record),
            time.time(),
            time.time(),
        ),
    )


async def test_every_edit_queued_before_the_upgrade_is_delivered_after_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: EmbeddedServer,
    token_a: str,
    api_a: ServerApi,
) -> None:
    data_dir = tmp_path / "device"
    on_server = api_a.create(title="Gate", site="East")
    at_schema(monkeypatch, SCOPE_VERSION - 1)
    with make_store(data_dir) as old:
        old_server_row(old, on_server)
        created = [old_create(old, {"title": f"WO {n}", "site": "North"}) for n in range(40)]
        for entity in created[:20]:
            old_update(old, entity, {"status": "in_progress"}, None)
        for entity in created[:10]:
            old_update(old, entity, {"notes": "bring gasket"}, None)
        for entity in created[35:]:
            with old.db.atomic():
                old.queue.enqueue(TOPIC_WORK_ORDERS, {"op": "delete", "fields": {}}, entity)
        old_update(old, on_server["id"], {"notes": "hinge loose"}, on_server["version"])
        before = {row["id"]: row for row in job_rows(old)}
    monkeypatch.undo()

    with make_store(data_dir) as store:
        version = store.db.execute_sql("SELECT MAX(version) FROM schema_version").fetchone()
        assert version == (migrations.LATEST_VERSION,)
        assert migrations.LATEST_VERSION >= SCOPE_VERSION
        kept = {row["id"]: row for row in job_rows(store)}
        for job_id, row in before.items():
            after = kept[job_id]
            same = ("payload", "payload_version", "idempotency_key", "status", "base_version")
            assert {k: after[k] for k in same} == {k: row[k] for k in same}
        assert store.cache.get(on_server["id"])["team"] == ""

        await sync_until_idle(store, server.base_url, token_a)
        assert {row["status"] for row in job_rows(store)} == {"done"}
        assert len(job_rows(store)) == len(before)

    for n, entity in enumerate(created):
        reply = api_a.client.get(f"/v1/records/{entity}")
        assert reply.status_code == 200, reply.text
        record = reply.json()["record"]
        assert record["title"] == f"WO {n}"
        assert record["deleted"] is (n >= 35)
        assert record["status"] == ("in_progress" if n < 20 else "open")
        assert record["notes"] == ("bring gasket" if n < 10 else "")
        # Once each: a create and its updates, no duplicate applied.
        assert record["version"] == 1 + (n < 20) + (n < 10) + (n >= 35)
    gate = api_a.client.get(f"/v1/records/{on_server['id']}").json()["record"]
    assert gate["notes"] == "hinge loose"
    assert gate["version"] == on_server["version"] + 1
