"""Schema steps: what an existing server database needs to match the models of this release.

`create_tables(safe=True)` makes missing tables but never touches a table that exists, so a
column added to a model reaches an older database only through a step here. Steps are
numbered, applied in order, each in one transaction with the row that records it, and
idempotent (a fresh database already has the columns; a step checks before it adds). Several
server processes (or hosts) may start at once: the first applies the steps, the others wait
for it. On SQLite `BEGIN IMMEDIATE` makes them wait. On PostgreSQL an advisory lock held by
the session does, taken by polling `pg_try_advisory_lock` between statements: an index built
`CONCURRENTLY` (step 4) runs outside any transaction and waits for every transaction whose
snapshot is older than its own, which would include a process left waiting for the lock
inside a statement, while that process waits for the builder: a deadlock.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import peewee as pw
from playhouse.migrate import SchemaMigrator, migrate

from server.db.models import Tables
from server.db.search_index import create_search_index
from server.scope.files import separate_file_entries
from server.scope.legacy import backfill_scope_entries, mark_legacy_devices

__all__ = ["STEPS", "apply_steps"]

# Any constant both processes agree on: it names "the schema steps" among advisory locks.
_ADVISORY_LOCK = 0x46534D47

Step = Callable[[pw.Database, Tables], None]


def _columns(db: pw.Database, table: str) -> set[str]:
    return {column.name for column in db.get_columns(table)}


def _add_missing(db: pw.Database, table: str, fields: dict[str, pw.Field]) -> None:
    present = _columns(db, table)
    migrator = SchemaMigrator.from_database(db)
    operations = [
        migrator.add_column(table, name, field)
        for name, field in fields.items()
        if name not in present
    ]
    if operations:
        migrate(*operations)


def _step1_people_and_teams(db: pw.Database, tables: Tables) -> None:
    """Work orders gain `team` and `created_by`, devices the person (`user_name`) and `team`.

    A device provisioned before users existed is its own user, as `add-device` does now."""
    _add_missing(
        db,
        tables.WorkOrder._meta.table_name,
        {
            "team": pw.CharField(max_length=100, default=""),
            "created_by": pw.CharField(max_length=200, default=""),
        },
    )
    _add_missing(
        db,
        tables.Device._meta.table_name,
        {
            "user_name": pw.CharField(max_length=200, default=""),
            "team": pw.CharField(max_length=100, default=""),
        },
    )
    devices = tables.Device
    devices.update(user_name=devices.name).where(devices.user_name == "").execute()


def _step3_devices_before_scopes(db: pw.Database, tables: Tables) -> None:
    """Devices gain `legacy_scope` (see server/scope/legacy.py) and `feed_position` (the last
    change token they pulled from, for pruning); workers from before scopes become legacy, and
    work orders from before scopes get their scope entries."""
    _add_missing(
        db,
        tables.Device._meta.table_name,
        {
            "legacy_scope": pw.BooleanField(default=False),
            "feed_position": pw.BigIntegerField(default=0),
        },
    )
    mark_legacy_devices(tables)
    backfill_scope_entries(db, tables)


def _step4_covering_feed_index(db: pw.Database, tables: Tables) -> None:
    """The feed's `scope_entry (key, seq)` index gains `entity_id`, which the feed reads too.

    Without it every change of a page is a lookup in the table, whose rows of one key lie
    scattered among all the others: at a million work orders a worker's first sync read
    600 pages more there than at ten thousand. The index with the column is created before
    the narrower one goes, so no moment is left without one.

    On PostgreSQL both go `CONCURRENTLY`, outside a transaction (`apply_steps`): a plain
    `CREATE INDEX` blocks every write to the table for the whole build, minutes at millions
    of entries. A concurrent build that failed (or whose process was killed) leaves its index
    INVALID: unused by queries yet kept up by every write. It is dropped and built again."""
    table = tables.ScopeEntry._meta.table_name
    wide, narrow = f"{table}_key_seq_entity_id", f"{table}_key_seq"
    columns = '("key", "seq", "entity_id")'
    if not isinstance(db, pw.PostgresqlDatabase):
        db.execute_sql(f'CREATE INDEX IF NOT EXISTS "{wide}" ON "{table}" {columns}')
        db.execute_sql(f'DROP INDEX IF EXISTS "{narrow}"')
        return
    found = db.execute_sql(
        "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (f'"{wide}"',)
    ).fetchone()
    if found is not None and not found[0]:
        db.execute_sql(f'DROP INDEX CONCURRENTLY IF EXISTS "{wide}"')
    db.execute_sql(f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{wide}" ON "{table}" {columns}')
    db.execute_sql(f'DROP INDEX CONCURRENTLY IF EXISTS "{narrow}"')


def _step5_conflict_base(db: pw.Database, tables: Tables) -> None:
    """Conflicts gain `base`: the values a worker's edit started from, for the console's
    "before" column beside the device's and the server's."""
    _add_missing(db, tables.Conflict._meta.table_name, {"base": pw.TextField(null=True)})


def _step6_work_order_changes(db: pw.Database, tables: Tables) -> None:
    """The change log of work orders (server/records/history.py), for the console's history
    and audit; work orders from before it have no entries for their earlier changes."""
    tables.WorkOrderChange.create_table(safe=True)


def _step8_device_installs(db: pw.Database, tables: Tables) -> None:
    """Devices gain the install they write from and its floor (server/scope/echoes.py): the
    feed leaves out what that install wrote. A device from before has none, so its feed
    carries everything until it sends one."""
    _add_missing(
        db,
        tables.Device._meta.table_name,
        {
            "install_id": pw.CharField(max_length=64, default=""),
            "install_floor": pw.BigIntegerField(default=0),
        },
    )


def _step21_ending_legacy_in_batches(db: pw.Database, tables: Tables) -> None:
    """Devices gain `legacy_ending_after`: how far the end of a legacy device's everything,
    done in batches (server/scope/legacy.py), has gone."""
    _add_missing(
        db,
        tables.Device._meta.table_name,
        {"legacy_ending_after": pw.CharField(max_length=36, null=True)},
    )


#: (number, step) in order. Append only; never edit a released step. Numbers need not be
#: contiguous: each step is applied once, whichever landed first.
STEPS: list[tuple[int, Step]] = [
    (1, _step1_people_and_teams),
    (2, create_search_index),
    (3, _step3_devices_before_scopes),
    (4, _step4_covering_feed_index),
    (5, _step5_conflict_base),
    (6, _step6_work_order_changes),
    (8, _step8_device_installs),
    (20, separate_file_entries),
    (21, _step21_ending_legacy_in_batches),
]


#: Steps that run outside a transaction on PostgreSQL (their statements refuse one).
_OUTSIDE_A_TRANSACTION = frozenset({4})

# Between two tries of the lock another process holds: short at first (a step usually takes
# milliseconds), never more than this.
_LOCK_POLL_MAX_S = 0.5


def apply_steps(db: pw.Database, tables: Tables) -> list[int]:
    """Apply the steps this database lacks; return their numbers. Call it outside a
    transaction."""
    if not isinstance(db, pw.PostgresqlDatabase):
        with db.atomic():
            return _apply(db, tables, postgres=False)
    with _session_lock(db):
        return _apply(db, tables, postgres=True)


def _apply(db: pw.Database, tables: Tables, *, postgres: bool) -> list[int]:
    steps = tables.SchemaStep
    applied: list[int] = []
    done = {row.step for row in steps.select(steps.step)}
    for number, step in STEPS:
        if number in done:
            continue
        if postgres and number in _OUTSIDE_A_TRANSACTION:
            step(db, tables)  # idempotent: a process killed before the row below reruns it
            with db.atomic():
                _record(tables, number)
        else:
            with db.atomic():
                step(db, tables)
                _record(tables, number)
        applied.append(number)
    return applied


def _record(tables: Tables, number: int) -> None:
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    tables.SchemaStep.insert(step=number, applied_at=stamp).execute()


@contextmanager
def _session_lock(db: pw.Database) -> Iterator[None]:
    """Hold "the schema steps" advisory lock for this session (see the module docstring for
    why it is polled); a process that dies lets it go with its connection."""
    pause = 0.01
    while not db.execute_sql("SELECT pg_try_advisory_lock(%s)", (_ADVISORY_LOCK,)).fetchone()[0]:
        time.sleep(pause)
        pause = min(2 * pause, _LOCK_POLL_MAX_S)
    try:
        yield
    finally:
        db.execute_sql("SELECT pg_advisory_unlock(%s)", (_ADVISORY_LOCK,))
