"""Upgrades with a full queue: a migration that reshapes work orders migrates queued payloads."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import peewee as pw
import pytest
from playhouse.migrate import SqliteMigrator
from playhouse.migrate import migrate as apply_operations
from store_support import at_schema

from app.records import PAYLOAD_SCHEMA_VERSION
from app.store import db as db_module
from app.store import migrations
from app.store.queue import Outcome
from app.store.store import TOPIC_WORK_ORDERS, Store

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


@contextlib.contextmanager
def cache_with_team(store: Store) -> Iterator[None]:
    """Today's create writes `team` (app.records), which an old cache lacks: lend it the
    column for a setup's creates and take it away again (SQLite >= 3.35 drops columns)."""
    sql = store.db.execute_sql
    lacking = "team" not in {row[1] for row in sql("PRAGMA table_info(work_orders)")}
    if lacking:
        sql("ALTER TABLE work_orders ADD COLUMN team TEXT NOT NULL DEFAULT ''")
    yield
    if lacking:
        sql("ALTER TABLE work_orders DROP COLUMN team")


def old_queue(data_dir: Path) -> dict[str, int]:
    """`full_queue` as an old version's queue left it, written as SQL: today's queue writes
    today's attempt rows, which an old schema cannot hold."""
    with Store(data_dir) as store:
        with cache_with_team(store):
            ids = {
                status: store.record_edit(
                    "create", None, {"title": f"{status} job", "site": f"{status} yard"}
                ).job_id
                for status in ("done", "dead", "conflict", "leased", "pending")
            }
        sql = store.db.execute_sql
        sql(
            "UPDATE jobs SET status = 'done', finished_at = updated_at WHERE id = ?", (ids["done"],)
        )
        for status, error in (("dead", "HTTP 422"), ("conflict", "HTTP 409")):
            sql(
                "UPDATE jobs SET status = ?, attempt_count = 1, last_error = ? WHERE id = ?",
                (status, error, ids[status]),
            )
        sql(
            "UPDATE jobs SET status = 'leased', attempt_count = 1, locked_by = 'worker-1', "
            "locked_until = ? WHERE id = ?",
            (time.time() + 60, ids["leased"]),
        )
        ids["update"] = old_update(store, _entity(store, ids["pending"]), {"site": "East"})
    return ids


def old_update(store: Store, entity_id: str, fields: dict[str, Any]) -> int:
    """An update as an old release saved it: its visible fields and its job. Today's
    `record_edit` reads the cache's newest columns, which an old schema lacks."""
    store.cache.apply_local(entity_id, fields, time.time())
    return store.queue.enqueue(
        TOPIC_WORK_ORDERS, {"op": "update", "fields": fields}, entity_id, base_version=None
    )


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
    at_schema(monkeypatch, 2)
    ids = old_queue(data_dir)
    with Store(data_dir) as store:
        # What version 2 wrote: dead and conflicted jobs had a finished_at too.
        store.db.execute_sql(
            "UPDATE jobs SET finished_at = updated_at WHERE status IN ('dead', 'conflict')"
        )
        dead_entity = _entity(store, ids["dead"])
        behind_dead = old_update(store, dead_entity, {"site": "West"})
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


def test_migration_5_gives_old_attempts_reason_codes_and_keeps_history(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_schema(monkeypatch, 4)
    ids = old_queue(data_dir)
    history = [
        (ids["done"], "done", 201, None),
        (ids["dead"], "retry", None, "timed out (ReadTimeout)"),
        (ids["dead"], "retry", 503, "server unavailable (503)"),
        (ids["dead"], "dead", 422, "the server rejected the values (validation_error)"),
        (ids["conflict"], "conflict", 409, "the work order changed on the server"),
        (ids["pending"], "retry", None, "cannot reach the server"),
        (ids["pending"], "dead", 0, "gave up after 12 attempts: cannot reach the server"),
        (ids["leased"], "lease_expired", None, "lease expired (worker stopped?)"),
    ]
    with Store(data_dir) as store:
        for job_id, outcome, status, error in history:
            store.db.execute_sql(
                "INSERT INTO attempts (job_id, started_at, duration_ms, outcome, http_status, "
                "error) VALUES (?, 0, 1, ?, ?, ?)",
                (job_id, outcome, status, error),
            )
        before = jobs_by_id(store)
    monkeypatch.undo()

    with Store(data_dir) as store:
        assert jobs_by_id(store) == before, "queued payloads and keys untouched"
        rows = store.db.execute_sql(
            "SELECT outcome, http_status, error, kind, reason_code FROM attempts ORDER BY id"
        ).fetchall()
        assert [row[:3] for row in rows] == [h[1:] for h in history], "history kept"
        assert [row[3:] for row in rows] == [
            ("success", "applied"),
            ("transient", "timeout"),
            ("transient", "server_busy"),
            ("permanent", "invalid"),
            ("conflict", "version_conflict"),
            ("transient", "network"),
            ("transient", "gave_up"),
            (None, "lease_expired"),
        ]


def test_migration_8_adds_editing_holds_and_keeps_a_full_queue(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_schema(monkeypatch, 7)
    ids = full_queue(data_dir)
    with Store(data_dir) as old:
        before = jobs_by_id(old)
        assert "editing_holds" not in old.db.get_tables()
    monkeypatch.undo()

    with Store(data_dir) as store:
        assert jobs_by_id(store) == before, "every queued edit as it was"
        assert store.db.execute_sql("SELECT COUNT(*) FROM editing_holds").fetchone() == (0,)
        # The queue goes on where it was: the pending create, then the edit queued after it.
        assert [job.id for job in store.queue.claim("worker-2", limit=10)] == [ids["pending"]]
