"""The text index behind search (server/records/search.py), made by a schema step on each backend.

- SQLite: an FTS5 table with the trigram tokenizer (SQLite 3.34 or later) over the title,
  site and assignee of `work_order`, external content keyed by the work order's `seq` (unique,
  and unlike a text-keyed table's rowid never renumbered by VACUUM). Triggers keep it in step
  with every write to `work_order`, inside the writing transaction.
- PostgreSQL: pg_trgm GIN indexes on the three columns. pg_trgm answers LIKE/ILIKE itself, so
  search keeps its substring meaning; a tsvector index would match words (and stems), so
  "pum" would stop finding "Pump 3". pg_trgm is a trusted extension (PostgreSQL 13 and later):
  the database's owner may create it; when that is refused the step says what to run.
"""

from __future__ import annotations

import sqlite3

import peewee as pw

from server.db.models import Tables

__all__ = ["SEARCH_COLUMNS", "create_search_index"]

SEARCH_COLUMNS = ("title", "site", "assignee")


def _sqlite(db: pw.Database, table: str) -> None:
    if sqlite3.sqlite_version_info < (3, 34):
        raise RuntimeError(
            "search needs SQLite 3.34 or later (the FTS5 trigram tokenizer); this Python has "
            f"SQLite {sqlite3.sqlite_version}"
        )
    index = f"{table}_search"
    columns = ", ".join(f'"{name}"' for name in SEARCH_COLUMNS)
    new = ", ".join(f'new."{name}"' for name in SEARCH_COLUMNS)
    old = ", ".join(f'old."{name}"' for name in SEARCH_COLUMNS)
    exists = db.execute_sql(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (index,)
    ).fetchone()
    db.execute_sql(
        f'CREATE VIRTUAL TABLE IF NOT EXISTS "{index}" USING fts5({columns}, '
        f"content='{table}', content_rowid='seq', tokenize='trigram')"
    )
    forget = (
        f'INSERT INTO "{index}"("{index}", rowid, {columns}) VALUES (\'delete\', old."seq", {old});'
    )
    learn = f'INSERT INTO "{index}"(rowid, {columns}) VALUES (new."seq", {new});'
    triggers = {
        "insert": f'AFTER INSERT ON "{table}" BEGIN {learn} END',
        "delete": f'AFTER DELETE ON "{table}" BEGIN {forget} END',
        "update": f'AFTER UPDATE OF "seq", {columns} ON "{table}" BEGIN {forget} {learn} END',
    }
    for name, body in triggers.items():
        db.execute_sql(f'CREATE TRIGGER IF NOT EXISTS "{index}_{name}" {body}')
    if not exists:
        db.execute_sql(f'INSERT INTO "{index}"("{index}") VALUES (\'rebuild\')')


def _postgres(db: pw.Database, table: str) -> None:
    try:
        with db.atomic():
            db.execute_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except pw.DatabaseError as error:
        raise RuntimeError(
            "search needs the PostgreSQL extension pg_trgm and this database user may not "
            "create it: run `CREATE EXTENSION pg_trgm;` in this database as its owner or a "
            f"superuser (the contrib package must be installed), then start again ({error})"
        ) from None
    for name in SEARCH_COLUMNS:
        db.execute_sql(
            f'CREATE INDEX IF NOT EXISTS "{table}_{name}_trgm" ON "{table}" '
            f'USING gin ("{name}" gin_trgm_ops)'
        )
    db.execute_sql(f'ANALYZE "{table}"')


def create_search_index(db: pw.Database, tables: Tables) -> None:
    """Make the search index of this backend and fill it from the work orders there."""
    table = tables.WorkOrder._meta.table_name
    if isinstance(db, pw.PostgresqlDatabase):
        _postgres(db, table)
    else:
        _sqlite(db, table)
