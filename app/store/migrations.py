"""Forward-only schema migrations (playhouse.migrate), including queued payloads.

Each migration runs in its own transaction together with the row recording it, so a crash
leaves the database at the previous version or the next, never between. A migration that
changes the shape of a work order must also rewrite queued payloads with
`rewrite_queued_payloads`, so an app update never strands edits made before it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import peewee as pw
from playhouse.migrate import SqliteMigrator
from playhouse.migrate import migrate as apply_operations

from app.store import models

__all__ = ["LATEST_VERSION", "MIGRATIONS", "migrate", "rewrite_queued_payloads"]

Migration = Callable[[pw.SqliteDatabase, SqliteMigrator], None]


def _v1_initial(db: pw.SqliteDatabase, migrator: SqliteMigrator) -> None:
    with db.bind_ctx(models.SCHEMA_V1):
        db.create_tables(models.SCHEMA_V1)
    for statement in models.INDEXES_V1:
        db.execute_sql(statement)


def _v2_conflicts(db: pw.SqliteDatabase, migrator: SqliteMigrator) -> None:
    db.execute_sql(
        """
        CREATE TABLE conflicts (
            job_id INTEGER PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
            entity_key TEXT NOT NULL,
            kind TEXT NOT NULL,
            op TEXT NOT NULL,
            base TEXT,
            mine TEXT NOT NULL,
            server TEXT NOT NULL,
            overlapping TEXT NOT NULL,
            auto_merged TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'open'
                CHECK (status IN ('open', 'escalating', 'escalated', 'resolved')),
            review_id TEXT,
            review_key TEXT,
            note TEXT,
            created_at REAL NOT NULL,
            resolved_at REAL,
            resolution TEXT
        )
        """
    )
    db.execute_sql("CREATE INDEX conflicts_entity ON conflicts (entity_key, status)")


def _v3_open_jobs_by_finished_at(db: pw.SqliteDatabase, migrator: SqliteMigrator) -> None:
    """``finished_at`` is set when a job is done, and only then (a dead or conflicted job
    still holds back its work order); the open-jobs index keys on it instead of ``status``.

    A claim changes ``status``, so an index whose condition names ``status`` had its entry
    deleted and written back on every claim: one more page per commit and a third of a batch
    claim's time. ``finished_at`` changes only when a job leaves the open set.
    """
    db.execute_sql("UPDATE jobs SET finished_at = NULL WHERE status != 'done'")
    db.execute_sql(
        "UPDATE jobs SET finished_at = updated_at WHERE status = 'done' AND finished_at IS NULL"
    )
    db.execute_sql("DROP INDEX jobs_entity_open")
    db.execute_sql(models.OPEN_JOBS_INDEX)


def _v4_review_problem(db: pw.SqliteDatabase, migrator: SqliteMigrator) -> None:
    """Why the server refused to open a conflict's review, shown to the person (NULL: none)."""
    apply_operations(migrator.add_column("conflicts", "review_problem", pw.TextField(null=True)))


def _v5_attempt_reasons(db: pw.SqliteDatabase, migrator: SqliteMigrator) -> None:
    """Each attempt keeps what its reply meant (``kind``, a ReplyKind) and why (``reason_code``,
    a Reason), so the UI words a failure from a code instead of matching stored English.

    The history written before is classified once, here, from its status and its words: the
    only place old English text is read. Queued payloads and the words themselves are kept.
    """
    apply_operations(
        migrator.add_column("attempts", "kind", pw.TextField(null=True)),
        migrator.add_column("attempts", "reason_code", pw.TextField(null=True)),
    )
    db.execute_sql(_V5_BACKFILL)


_V5_BACKFILL = """
UPDATE attempts SET
  reason_code = CASE
    WHEN outcome = 'done' THEN 'applied'
    WHEN outcome = 'lease_expired' THEN 'lease_expired'
    WHEN outcome = 'auto_merged' THEN 'auto_merged'
    WHEN outcome = 'conflict' THEN 'version_conflict'
    WHEN error LIKE 'gave up after %' THEN 'gave_up'
    WHEN http_status = 401 THEN 'signed_out'
    WHEN http_status = 403 THEN 'forbidden'
    WHEN http_status = 404 THEN 'not_found'
    WHEN http_status = 413 THEN 'too_large'
    WHEN http_status = 422 AND error LIKE 'idempotency key reused%' THEN 'key_reused'
    WHEN http_status IN (400, 422) THEN 'invalid'
    WHEN http_status = 409 AND outcome = 'retry' THEN 'key_in_use'
    WHEN http_status = 429 THEN 'rate_limited'
    WHEN error LIKE 'malformed reply%' OR error LIKE '%could not be decoded%' THEN 'malformed'
    WHEN http_status IN (502, 503, 504) THEN 'server_busy'
    WHEN http_status >= 500 THEN 'server_error'
    WHEN http_status >= 400 THEN 'refused'
    WHEN error LIKE 'timed out%' THEN 'timeout'
    WHEN outcome = 'retry' THEN 'network'
  END,
  kind = CASE
    WHEN outcome = 'done' THEN 'success'
    WHEN outcome IN ('conflict', 'auto_merged') THEN 'conflict'
    WHEN outcome = 'lease_expired' THEN NULL
    WHEN http_status = 401 THEN 'auth'
    WHEN outcome = 'retry' OR error LIKE 'gave up after %' THEN 'transient'
    WHEN outcome = 'dead' THEN 'permanent'
  END
"""


def _v6_scope(db: pw.SqliteDatabase, migrator: SqliteMigrator) -> None:
    """Scoped sync (issue 16): a work order's ``team``; ``pinned`` as the server last said
    (NULL: it did not say); ``left_scope_at``, when the server said the work order left this
    device's scope while edits of it were still unsent (the "No longer assigned to you"
    state, until they are delivered or discarded); and ``pin_requests``, pins asked for
    while offline, sent before the next pull (the last request per work order wins).

    Queued payloads are kept as they are: a create or an update without ``team`` is still a
    valid mutation (the field is optional), so nothing queued before the upgrade changes.
    """
    for statement in _V6_STATEMENTS:
        db.execute_sql(statement)


_V6_STATEMENTS = (
    # ADD COLUMN with a constant default rewrites no row: instant on a full cache.
    "ALTER TABLE work_orders ADD COLUMN team TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE work_orders ADD COLUMN pinned INTEGER",
    "ALTER TABLE work_orders ADD COLUMN left_scope_at REAL",
    # Work orders kept only for their unsent edits: few, looked up after every delivery.
    "CREATE INDEX work_orders_left_scope ON work_orders (id) WHERE left_scope_at IS NOT NULL",
    """
    CREATE TABLE pin_requests (
        entity_id TEXT PRIMARY KEY,
        pinned INTEGER NOT NULL CHECK (pinned IN (0, 1)),
        requested_at REAL NOT NULL,
        last_error TEXT
    )
    """,
)


def _v7_attachments(db: pw.SqliteDatabase, migrator: SqliteMigrator) -> None:
    """Photos and files on work orders (issue 15): one row per attachment, its bytes in the
    data dir by sha256 (`app.attachments.files`), its upload a job of topic ``attachments``.

    ``jobs.waits_for`` names the work order an upload waits for: held while that work order's
    create is unacknowledged, yet not in its per-entity order, so a long upload never holds
    back an edit. Queued edits are untouched (their ``waits_for`` is NULL).
    """
    apply_operations(migrator.add_column("jobs", "waits_for", pw.TextField(null=True)))
    db.execute_sql(
        """
        CREATE TABLE attachments (
            id TEXT PRIMARY KEY,
            entity_id TEXT NOT NULL,
            filename TEXT NOT NULL,
            content_type TEXT NOT NULL,
            size INTEGER NOT NULL CHECK (size >= 0),
            sha256 TEXT NOT NULL,
            mine INTEGER NOT NULL DEFAULT 1,
            created_at REAL NOT NULL,
            created_by TEXT,
            upload_url TEXT,
            upload_offset INTEGER NOT NULL DEFAULT 0,
            confirmed_at REAL,
            removed_at REAL,
            stored INTEGER NOT NULL DEFAULT 0,
            thumbnail_size INTEGER,
            thumbnail_used_at REAL
        )
        """
    )
    db.execute_sql("CREATE INDEX attachments_entity ON attachments (entity_id, created_at)")
    db.execute_sql("CREATE INDEX attachments_sha256 ON attachments (sha256)")


def _v8_editing_holds(db: pw.SqliteDatabase, migrator: SqliteMigrator) -> None:
    """Work orders open in the app's editor (issue 16): one that leaves the scope while a
    person is typing in it stays on the device until the editor lets go of it, so a save
    never meets a work order the pull removed (`app.store.editing`). Nothing queued changes.
    """
    db.execute_sql("CREATE TABLE editing_holds (entity_id TEXT PRIMARY KEY, held_at REAL NOT NULL)")


def _v9_drafts(db: pw.SqliteDatabase, migrator: SqliteMigrator) -> None:
    """What the person typed in the editor and has not saved (issue 24), one row per form
    (``entity_id`` '' for a new work order): kept through a kill or a power cut, never sent
    (`app.store.drafts`). Nothing queued changes.
    """
    db.execute_sql(
        """
        CREATE TABLE drafts (
            entity_id TEXT PRIMARY KEY,
            fields TEXT NOT NULL,
            base TEXT NOT NULL,
            base_version INTEGER,
            updated_at REAL NOT NULL
        )
        """
    )


#: (version, migration) in order. Append only; never edit a released migration.
MIGRATIONS: list[tuple[int, Migration]] = [
    (1, _v1_initial),
    (2, _v2_conflicts),
    (3, _v3_open_jobs_by_finished_at),
    (4, _v4_review_problem),
    (5, _v5_attempt_reasons),
    (6, _v6_scope),
    (7, _v7_attachments),
    (8, _v8_editing_holds),
    (9, _v9_drafts),
]
LATEST_VERSION = MIGRATIONS[-1][0]


def current_version(db: pw.SqliteDatabase) -> int:
    if "schema_version" not in db.get_tables():
        return 0
    row = db.execute_sql("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0] or 0)


def migrate(db: pw.SqliteDatabase) -> int:
    """Apply every migration newer than the database; return the resulting version."""
    migrator = SqliteMigrator(db)
    version = current_version(db)
    for target, migration in MIGRATIONS:
        if target <= version:
            continue
        with db.atomic():
            migration(db, migrator)
            db.execute_sql(
                "INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                (target, time.time()),
            )
        version = target
    return version


def rewrite_queued_payloads(
    db: pw.SqliteDatabase,
    from_version: int,
    to_version: int,
    transform: Callable[[dict[str, Any]], dict[str, Any]],
) -> int:
    """Rewrite every not-yet-delivered payload of `from_version` to `to_version`.

    Delivered (done) jobs keep their historical payloads. Returns the number rewritten.
    """
    rows = db.execute_sql(
        "SELECT id, payload FROM jobs WHERE payload_version = ? AND status != 'done'",
        (from_version,),
    ).fetchall()
    for job_id, payload in rows:
        new_payload = json.dumps(transform(json.loads(payload)), separators=(",", ":"))
        db.execute_sql(
            "UPDATE jobs SET payload = ?, payload_version = ? WHERE id = ?",
            (new_payload, to_version, job_id),
        )
    return len(rows)
