"""Upgrades with a full queue: a migration that reshapes work orders migrates queued payloads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import peewee as pw
import pytest
from playhouse.migrate import SqliteMigrator
from playhouse.migrate import migrate as apply_operations

from app.records import PAYLOAD_SCHEMA_VERSION
from app.store import db as db_module
from app.store import migrations
from app.store.queue import Outcome
from app.store.store import Store

OLD = PAYLOAD_SCHEMA_VERSION
NEW = PAYLOAD_SCHEMA_VERSION + 1


def split_site(payload: dict[str, Any]) -> dict[str, Any]:
    """The synthetic shape change: `site` becomes `site_name` plus a short `site_code`."""
    fields = dict(payload["fields"])
    if "site" in fields:
        site = fields.pop("site")
        fields["site_name"] = site
        fields["site_code"] = site[:3].upper()
    return {**payload, "fields": fields}


def add_site_code(db: pw.SqliteDatabase, migrator: SqliteMigrator) -> None:
    apply_operations(migrator.add_column("work_orders", "site_code", pw.TextField(default="")))
    db.execute_sql("UPDATE work_orders SET site_code = UPPER(SUBSTR(site, 1, 3))")
    migrations.rewrite_queued_payloads(db, OLD, NEW, split_site)


def install(monkeypatch: pytest.MonkeyPatch, migration: migrations.Migration) -> int:
    target = migrations.LATEST_VERSION + 1
    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, (target, migration)])
    monkeypatch.setattr(migrations, "LATEST_VERSION", target)
    monkeypatch.setattr(db_module, "LATEST_VERSION", target)
    return target


def full_queue(data_dir: Path) -> dict[str, int]:
    """An old database holding a job in every status."""
    with Store(data_dir) as store:
        ids = {
            status: store.record_edit(
                "create", None, {"title": f"{status} job", "site": f"{status} yard"}
            ).job_id
            for status in ("done", "dead", "conflict", "leased", "pending")
        }
        claimed = {job.id: job for job in store.queue.claim("worker-1", limit=10)}
        store.queue.ack(claimed[ids["done"]])
        store.queue.dead(claimed[ids["dead"]], Outcome(error="HTTP 422"))
        store.queue.conflict(claimed[ids["conflict"]], Outcome(error="HTTP 409"))
        store.queue.release([claimed[ids["pending"]]])
        ids["update"] = store.record_edit(
            "update", _entity(store, ids["pending"]), {"site": "East"}
        ).job_id
    return ids


def _entity(store: Store, job_id: int) -> str:
    return str(
        store.db.execute_sql("SELECT entity_key FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]
    )


def jobs_by_id(store: Store) -> dict[int, tuple[Any, ...]]:
    return {
        row[0]: row
        for row in store.db.execute_sql(
            "SELECT id, status, payload_version, payload, idempotency_key FROM jobs"
        )
    }


def test_migration_rewrites_every_undelivered_payload(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = full_queue(data_dir)
    with Store(data_dir) as store:
        before = jobs_by_id(store)
    target = install(monkeypatch, add_site_code)

    with Store(data_dir) as store:
        after = jobs_by_id(store)
        version = store.db.execute_sql("SELECT MAX(version) FROM schema_version").fetchone()
        assert version == (target,)
        columns = [c.name for c in store.db.get_columns("work_orders")]
        assert "site_code" in columns
        assert store.db.execute_sql("SELECT DISTINCT site_code FROM work_orders").fetchall()

        assert set(after) == set(before)
        for job_id, (_, status, payload_version, payload, key) in after.items():
            _, old_status, _, old_payload, old_key = before[job_id]
            assert (status, key) == (old_status, old_key), "only payloads change"
            if status == "done":
                assert (payload_version, payload) == (OLD, old_payload), "history untouched"
            else:
                assert payload_version == NEW
                assert json.loads(payload) == split_site(json.loads(old_payload))
        assert after[ids["update"]][2] == NEW
        assert json.loads(after[ids["update"]][3])["fields"] == {
            "site_name": "East",
            "site_code": "EAS",
        }
        # The worker picks the migrated edit up as it is now shaped.
        [job] = store.queue.claim("worker-2")
        assert job.id == ids["pending"]
        assert job.payload_version == NEW
        assert job.payload["fields"]["site_code"] == "PEN"

    with Store(data_dir) as store:  # opening again migrates nothing twice
        assert store.db.execute_sql("SELECT COUNT(*) FROM schema_version").fetchone() == (target,)


def test_failed_migration_leaves_the_old_version_and_payloads(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full_queue(data_dir)
    with Store(data_dir) as store:
        before = jobs_by_id(store)
    seen = 0

    def explode(payload: dict[str, Any]) -> dict[str, Any]:
        nonlocal seen
        seen += 1
        if seen == 3:
            raise RuntimeError("migration bug on the third payload")
        return split_site(payload)

    def broken(db: pw.SqliteDatabase, migrator: SqliteMigrator) -> None:
        apply_operations(migrator.add_column("work_orders", "site_code", pw.TextField(default="")))
        migrations.rewrite_queued_payloads(db, OLD, NEW, explode)

    install(monkeypatch, broken)
    with pytest.raises(RuntimeError, match="third payload"):
        Store(data_dir)
    monkeypatch.undo()

    with Store(data_dir) as store:
        assert jobs_by_id(store) == before
        assert "site_code" not in [c.name for c in store.db.get_columns("work_orders")]
        version = store.db.execute_sql("SELECT MAX(version) FROM schema_version").fetchone()
        assert version == (migrations.LATEST_VERSION,)


def test_migration_3_keys_open_jobs_on_finished_at(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:2])
    monkeypatch.setattr(migrations, "LATEST_VERSION", 2)
    monkeypatch.setattr(db_module, "LATEST_VERSION", 2)
    ids = full_queue(data_dir)
    with Store(data_dir) as store:
        # What version 2 wrote: dead and conflicted jobs had a finished_at too.
        store.db.execute_sql(
            "UPDATE jobs SET finished_at = updated_at WHERE status IN ('dead', 'conflict')"
        )
        dead_entity = _entity(store, ids["dead"])
        behind_dead = store.record_edit("update", dead_entity, {"site": "West"}).job_id
    monkeypatch.undo()

    with Store(data_dir) as store:
        sql = store.db.execute_sql
        assert sql("SELECT MAX(version) FROM schema_version").fetchone() == (
            migrations.LATEST_VERSION,
        )
        finished = set(sql("SELECT status, finished_at IS NOT NULL FROM jobs").fetchall())
        assert finished == {
            ("done", 1),
            ("dead", 0),
            ("conflict", 0),
            ("leased", 0),
            ("pending", 0),
        }
        (index,) = sql("SELECT sql FROM sqlite_master WHERE name = 'jobs_entity_open'").fetchone()
        assert index.endswith("WHERE finished_at IS NULL")
        # Per-entity order still holds across the upgrade: the edit behind the dead job waits,
        # the other pending edits go, in order.
        claimed = [job.id for job in store.queue.claim("worker-2", limit=10)]
        assert claimed == [ids["pending"]]
        assert behind_dead not in claimed
        store.queue.discard(ids["dead"])
        later = [job.id for job in store.queue.claim("worker-2", limit=10)]
        assert later == [behind_dead]
