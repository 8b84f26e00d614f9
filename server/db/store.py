"""Opening the server database from a URL, and the write transaction that numbers changes.

A reader of the changes feed must never be served change N and later find an N-1 committed
behind its back. SQLite has one writer (`BEGIN IMMEDIATE`): every write transaction takes
the next numbers from the `change_counter` row, so numbers become visible in commit order.

PostgreSQL writers take no shared lock. A write transaction numbers its changes
`base + xid × 2^24 + i` (`i` = 1, 2, … within it), where `xid` is its own transaction id
(`pg_current_xact_id()`, 64 bits, never reused) and `base` the counter row's value, frozen at
the last number SQLite-style counting (or a server from before this) handed out, so every
new number lies above every old one. Numbers of different transactions never meet: each owns
the block of its xid. A reader serves only numbers at or below the *horizon*
`base + xmin × 2^24`, where `xmin = pg_snapshot_xmin(pg_current_snapshot())` is the oldest
transaction still in progress when the horizon is read. Proof that nothing committed later
can appear at or below a horizon already served:

- every transaction with an xid below `xmin` has ended (committed or rolled back): that is
  what `xmin` means, so all its numbers, the only ones at or below the horizon besides the
  old ones (`≤ base`), are final;
- every transaction still running has an xid ≥ `xmin` (running ones below the snapshot's
  xmax are in it and bound xmin; the others are ≥ xmax ≥ xmin), and every later one draws an
  xid ≥ the next xid ≥ xmax ≥ xmin: their numbers are all `≥ base + xmin × 2^24 + 1`;
- `xmin` never moves back (no transaction below it is left to start), so horizons grow.

The cost: a change becomes visible when every transaction older than its own has ended,
anywhere in the cluster; a write left open holds the feed back (not other writers).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import peewee as pw
from playhouse import db_url

from server.db.models import bind_models
from server.db.schema import apply_steps
from server.db.sqlite import QueuedSqliteDatabase
from server.scope.keys import restamp_changed

__all__ = ["BLOCK", "ChangeSequence", "Store", "open_store"]

_COUNTER = "changes"

#: Numbers one PostgreSQL transaction may hand out; xids stay below 2^39 (half a trillion
#: transactions) before `base + xid × BLOCK` outgrows BIGINT.
BLOCK = 2**24

_HORIZON_SQL = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"

# Names "scope changes" among advisory locks: every PostgreSQL writer holds it shared (shared
# holders never wait for one another), a device's scope change exclusively.
_SCOPE_LOCK = 0x46534353

# SQLite builds before 3.32 refuse more than 999 parameters in one statement; multi-row
# statements stay under that everywhere.
_MAX_PARAMETERS = 999

# WAL lets the changes feed and GETs read while one writer commits; NORMAL sync is durable
# against process crashes, and the busy timeout turns lock waits into waits, not errors.
_SQLITE_PRAGMAS = (
    ("journal_mode", "wal"),
    ("synchronous", "normal"),
    ("foreign_keys", 1),
)


class ChangeSequence:
    """Hands out the next change sequence numbers inside one write transaction."""

    def __init__(self, last: int, limit: int | None = None) -> None:
        self.start = last
        self.last = last
        self.limit = limit
        #: The scope entries are up to date with the changes numbered up to this one.
        self.stamped = last
        #: Number → (id, assignee, team, created_by) of each work order inserted new at it
        #: (after `stamped`).
        self.fresh: dict[int, tuple[str, str, str, str]] = {}

    def next(self) -> int:
        if self.limit is not None and self.last >= self.limit:
            raise RuntimeError(f"one transaction may hand out at most {BLOCK - 1} numbers")
        self.last += 1
        return self.last

    def rewind(self, last: int) -> None:
        """Hand out the numbers after `last` again (their writes were rolled back, and the
        scope entries written for them)."""
        self.last = last
        self.stamped = min(self.stamped, last)
        self.forget_fresh(last)

    def forget_fresh(self, after: int) -> None:
        """Forget the new work orders numbered after `after` (a savepoint rolled them back;
        their numbers stay unused)."""
        self.fresh = {seq: order for seq, order in self.fresh.items() if seq <= after}

    def note_fresh(self, seq: int, entity_id: str, assignee: str, team: str, creator: str) -> None:
        """The work order inserted at number `seq` had no row before (a new id)."""
        self.fresh[seq] = (entity_id, assignee, team, creator)

    def only_fresh(self) -> dict[int, tuple[str, str, str, str]] | None:
        """The new work orders, when they are every change numbered after `stamped`."""
        return self.fresh if len(self.fresh) == self.last - self.stamped else None

    def mark_stamped(self) -> None:
        """The scope entries were brought up to date with every change numbered so far."""
        self.stamped = self.last
        self.fresh = {}


class Store:
    """A database connection factory plus the model classes bound to it."""

    def __init__(self, database: pw.Database) -> None:
        self.db = database
        self.tables = bind_models(database)
        self.is_postgres = isinstance(database, pw.PostgresqlDatabase)
        self._base: int | None = None

    def marks(self, count: int) -> str:
        """`?, ?, ?`: `count` placeholders in the driver's style, for `IN (…)` and `VALUES`.

        Raw marks, not peewee's `in_()`: peewee renders each value of a list as an expression
        node of its own, which for the 500 ids of a feed window costs more than the query."""
        return ", ".join([self.db.param] * count)

    def values_list(self, rows: int, width: int) -> str:
        """`(?, ?), (?, ?)`: `rows` rows of `width` placeholders, in the driver's style."""
        row = "(" + self.marks(width) + ")"
        return ", ".join([row] * rows)

    def values_table(self, columns: Sequence[str], rows: int) -> str:
        """A parenthesized subquery of `rows` parameter rows with these column names.

        For `UPDATE … FROM`: the statement must start with UPDATE, or Python's sqlite3 reports
        no rowcount, and SQLite cannot name the columns of a bare `VALUES` in FROM.
        """
        names = ", ".join(f'"{name}"' for name in columns)
        values = self.values_list(rows, len(columns))
        return f"(WITH v({names}) AS (VALUES {values}) SELECT * FROM v)"

    def rows_per_statement(self, width: int) -> int:
        """How many rows of `width` parameters one multi-row statement may carry."""
        return max(1, _MAX_PARAMETERS // width)

    def create_schema(self) -> None:
        """Create missing tables and the counter row, and bring an older database up to date
        (server/db/schema.py); idempotent, safe from several processes."""
        with self.db.connection_context():
            with self.db.atomic():
                self._create_missing()
            counter = self.tables.ChangeCounter
            with self.db.atomic():
                counter.insert(name=_COUNTER, value=0).on_conflict_ignore().execute()
            apply_steps(self.db, self.tables)

    def _create_missing(self) -> None:
        """Create the tables and indexes that do not exist, and touch nothing else.

        `CREATE INDEX IF NOT EXISTS` locks its table against writes (SHARE) before it finds
        the index there: on every start, a server would wait for the writers of another
        process, and they for it, one table after another, and deadlock with them."""
        present = set(self.db.get_tables())
        models = self.tables.all()
        self.db.create_tables([m for m in models if m._meta.table_name not in present], safe=True)
        for model in models:
            table = model._meta.table_name
            if table not in present:
                continue
            indexes = {index.name for index in self.db.get_indexes(table)}
            if any(index._name not in indexes for index in model._meta.fields_to_index()):
                pw.SchemaManager(model, self.db).create_indexes(safe=True)

    def _counter_value(self) -> int:
        # Hand-written, as the UPDATE in write_transaction: each runs once per write.
        table = self.tables.ChangeCounter._meta.table_name
        sql = f'SELECT "value" FROM "{table}" WHERE "name" = {self.db.param}'
        found = self.db.execute_sql(sql, [_COUNTER]).fetchone()
        if found is None:
            raise RuntimeError("change counter row missing; was create_schema() run?")
        return int(found[0])

    def base(self) -> int:
        """PostgreSQL: the number below every xid block (the counter row, which only a
        SQLite server or one from before xid blocks moved)."""
        if self._base is None:
            self._base = self._counter_value()
        return self._base

    def horizon(self) -> int | None:
        """The highest change number a reader may serve now (None: any, on SQLite).

        Read it before anything else the page reads (see the module docstring)."""
        if not self.is_postgres:
            return None
        xmin = int(self.db.execute_sql(_HORIZON_SQL).fetchone()[0])
        return self.base() + xmin * BLOCK

    @contextmanager
    def write_transaction(self, *, rescope: bool = False) -> Iterator[ChangeSequence]:
        """A transaction that numbers its changes (see the module docstring).

        On PostgreSQL writers run side by side: each locks the rows it reads to change
        (`for_update`). `rescope` (a device's new user or team, which reads the entries of
        whole keys) waits for every other writer instead, and they for it."""
        with self.db.atomic():
            if self.is_postgres:
                base = self.base()
                lock = "pg_advisory_xact_lock" if rescope else "pg_advisory_xact_lock_shared"
                xid = self.db.execute_sql(
                    f"SELECT {lock}(%s), pg_current_xact_id()::text", (_SCOPE_LOCK,)
                ).fetchone()[1]
                xid = int(xid)
                start = base + xid * BLOCK
                sequence = ChangeSequence(start, start + BLOCK - 1)
            else:
                sequence = ChangeSequence(self._counter_value())
            yield sequence
            if sequence.last != sequence.start:
                self.restamp(sequence)  # every change reaches the scoped feeds in it
                if not self.is_postgres:
                    table, p = self.tables.ChangeCounter._meta.table_name, self.db.param
                    self.db.execute_sql(
                        f'UPDATE "{table}" SET "value" = {p} WHERE "name" = {p}',
                        [sequence.last, _COUNTER],
                    )

    def restamp(self, sequence: ChangeSequence) -> None:
        """Bring the scope entries up to date with the changes `sequence` numbered so far, in
        its write transaction (which does so at its end for any numbered later)."""
        if sequence.last != sequence.stamped:
            restamp_changed(self, sequence.stamped, sequence.last, sequence.only_fresh())
            sequence.mark_stamped()

    def for_update(self, query: Any) -> Any:
        """`query` locking the rows it reads until the write transaction ends (PostgreSQL;
        SQLite's single writer needs none)."""
        return query.for_update() if self.is_postgres else query

    def close(self) -> None:
        if not self.db.is_closed():
            self.db.close()


def open_store(url: str, *, create: bool = True) -> Store:
    """Open `sqlite:///path` or `postgresql://…` and (by default) create the schema."""
    parsed = urlparse(url)
    scheme = parsed.scheme
    if scheme == "sqlite":
        # As in peewee and SQLAlchemy: sqlite:///relative.db, sqlite:////absolute.db.
        path = parsed.path[1:]
        if not path:
            raise ValueError(f"{url!r} names no database file")
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        database = QueuedSqliteDatabase(
            path, pragmas=_SQLITE_PRAGMAS, timeout=30, lock_type="IMMEDIATE"
        )
    elif scheme in ("postgresql", "postgres"):
        database = db_url.connect(url.replace("postgres://", "postgresql://", 1))
    else:
        raise ValueError(f"unsupported database URL {url!r}: use sqlite:///… or postgresql://…")
    store = Store(database)
    if create:
        store.create_schema()
    return store
