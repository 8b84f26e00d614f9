"""Opening the server database from a URL, and the write transaction that numbers changes.

Every transaction that changes a work order first locks the single `change_counter` row and
takes its change sequence numbers from it. Writers are therefore serialized, so sequence
numbers become visible in commit order: a reader that has seen change N can never later
discover an N-1 committed behind its back. (A plain PostgreSQL SEQUENCE would not give that:
a transaction can draw 7, stall, and commit after another has committed 8.) SQLite already
serializes writers with `BEGIN IMMEDIATE`; on PostgreSQL the row lock (`FOR UPDATE`) does it
across any number of server processes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import peewee as pw
from playhouse import db_url

from server.db.models import bind_models
from server.db.schema import apply_steps
from server.scope.keys import restamp_changed

__all__ = ["ChangeSequence", "Store", "open_store"]

_COUNTER = "changes"

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

    def __init__(self, last: int) -> None:
        self.start = last
        self.last = last

    def next(self) -> int:
        self.last += 1
        return self.last

    def rewind(self, last: int) -> None:
        """Hand out the numbers after `last` again (their writes were rolled back)."""
        self.last = last


class Store:
    """A database connection factory plus the model classes bound to it."""

    def __init__(self, database: pw.Database) -> None:
        self.db = database
        self.tables = bind_models(database)
        self.is_postgres = isinstance(database, pw.PostgresqlDatabase)

    def values_list(self, rows: int, width: int) -> str:
        """`(?, ?), (?, ?)`: `rows` rows of `width` placeholders, in the driver's style."""
        row = "(" + ", ".join([self.db.param] * width) + ")"
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
                self.db.create_tables(self.tables.all(), safe=True)
            counter = self.tables.ChangeCounter
            with self.db.atomic():
                counter.insert(name=_COUNTER, value=0).on_conflict_ignore().execute()
            apply_steps(self.db, self.tables)

    @contextmanager
    def write_transaction(self) -> Iterator[ChangeSequence]:
        """A transaction holding the change counter; commits the numbers it handed out."""
        counter = self.tables.ChangeCounter
        with self.db.atomic():
            query = counter.select(counter.value).where(counter.name == _COUNTER)
            if self.is_postgres:
                query = query.for_update()
            last = query.scalar()
            if last is None:
                raise RuntimeError("change counter row missing; was create_schema() run?")
            sequence = ChangeSequence(int(last))
            yield sequence
            if sequence.last != sequence.start:
                # Every change reaches the scoped feeds in the same transaction.
                restamp_changed(self, sequence.start, sequence.last)
                counter.update(value=sequence.last).where(counter.name == _COUNTER).execute()

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
        database = pw.SqliteDatabase(
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
