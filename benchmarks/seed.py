"""A large server database in seconds: work orders of 2,000 users in 50 teams, written in bulk.

    population = Population(work_orders=1_000_000)
    seeded = seed_work_orders("postgresql://…", population)   # COPY on PostgreSQL
    tokens = provision(db_url, population)                     # new-worker, admin, drain-NN

Writing a million work orders through the API would take an hour; the benchmark needs the
*state* those writes leave, not their path. So the rows are written straight into the server's
tables, opened through `server.db.store.open_store` (its schema, indexes and pragmas): every
work order at version 1 with its own change number, and the change counter past the last one.
What else the server keeps per work order for the scoped feed (`scope_entry`, where it exists)
is written the same way, with the server's own key rules, so that the feed sees what it would
have seen after the real writes.

Who holds what: work order i is assigned to user `user-(i mod 2000)` and tagged with that
user's team (`team-(user mod 50)`), except 500 spread evenly over the feed, assigned to
`new-worker` (a worker device without a team), whose scope is therefore exactly 500 at every
table size.
"""

from __future__ import annotations

import inspect
import io
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.records import EDITABLE_FIELDS, validate_create  # noqa: E402
from server.db.store import Store, open_store  # noqa: E402
from server.embedded import provision_device  # noqa: E402
from server.records.mutations import now_iso  # noqa: E402

__all__ = ["NEW_WORKER", "Population", "provision", "seed_work_orders"]

NEW_WORKER = "new-worker"
_SQLITE_ROWS_PER_COMMIT = 50_000
_COPY_ROWS = 100_000


@dataclass(frozen=True)
class Population:
    work_orders: int
    users: int = 2_000
    teams: int = 50
    new_worker_orders: int = 500

    def user(self, index: int) -> str:
        return f"user-{index % self.users:04d}"

    def team(self, user_index: int) -> str:
        return f"team-{user_index % self.users % self.teams:02d}"

    def holder(self, index: int) -> tuple[str, str]:
        """(assignee, team) of work order `index`."""
        stride = max(self.work_orders // self.new_worker_orders, 1)
        if index % stride == 0 and index // stride < self.new_worker_orders:
            return NEW_WORKER, ""
        return self.user(index), self.team(index)

    def drain_devices(self, count: int) -> list[tuple[str, str, str]]:
        """(device name, user, team) of `count` new workers without a team: what they hold is
        what they create, so their first pull is small and the drain is what is measured."""
        return [(f"drain-{k:02d}", f"drain-user-{k:02d}", "") for k in range(count)]


def entity_id(index: int) -> str:
    """Work order `index`'s id: a valid UUID (version 4 bits), in feed order as text too."""
    return f"00000000-0000-4000-8000-{index + 1:012x}"


def _rows(
    population: Population, columns: list[str], defaults: dict[str, Any]
) -> Iterator[tuple[Any, ...]]:
    fields = validate_create({"title": "Seeded", "site": "Depot", "notes": "Seeded in bulk."})
    record = {
        **fields, "deleted": False, "version": 1, "updated_at": now_iso(),
        "updated_by": "seed", "created_by": "office",
    }  # fmt: skip
    row = [record[name] if name in record else defaults[name] for name in columns]
    at = {name: columns.index(name) for name in ("id", "title", "assignee", "seq")}
    team_at = columns.index("team") if "team" in EDITABLE_FIELDS and "team" in columns else None
    for index in range(population.work_orders):
        assignee, team = population.holder(index)
        row[at["id"]] = entity_id(index)
        row[at["title"]] = f"Work order {index}"
        row[at["assignee"]] = assignee
        row[at["seq"]] = index + 1
        if team_at is not None:
            row[team_at] = team
        yield tuple(row)


def _columns(store: Store) -> tuple[list[str], dict[str, Any]]:
    """The work-order table's columns and each one's model default."""
    fields = store.tables.WorkOrder._meta.sorted_fields
    return [f.column_name for f in fields], {f.column_name: f.default for f in fields}


def seed_work_orders(db_url: str, population: Population) -> dict[str, Any]:
    """Write `population` into the empty server database at `db_url`; return how many and the
    ids of `new-worker`'s work orders."""
    store = open_store(db_url)
    try:
        columns, defaults = _columns(store)
        table = store.tables.WorkOrder._meta.table_name
        rows = _rows(population, columns, defaults)
        if store.is_postgres:
            _copy(store, table, columns, rows)
        else:
            _insert_many(store, table, columns, rows)
        _write_server_side_rows(store, population, columns)
        counter = store.tables.ChangeCounter
        with store.db.atomic():
            counter.update(value=population.work_orders).where(counter.name == "changes").execute()
        if store.is_postgres:
            store.db.execute_sql(f'ANALYZE "{table}"')
    finally:
        store.close()
    mine = [
        entity_id(index)
        for index in range(population.work_orders)
        if population.holder(index)[0] == NEW_WORKER
    ]
    return {"work_orders": population.work_orders, "new_worker_ids": mine}


def _insert_many(
    store: Store, table: str, columns: list[str], rows: Iterator[tuple[Any, ...]]
) -> None:
    names = ", ".join(f'"{name}"' for name in columns)
    sql = f'INSERT INTO "{table}" ({names}) VALUES ({", ".join("?" * len(columns))})'
    cursor = store.db.cursor()
    # The seed is not what is measured, and a crash only means seeding again.
    cursor.execute("PRAGMA synchronous = OFF")
    batch: list[tuple[Any, ...]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == _SQLITE_ROWS_PER_COMMIT:
            with store.db.atomic():
                cursor.executemany(sql, batch)
            batch.clear()
    if batch:
        with store.db.atomic():
            cursor.executemany(sql, batch)


def _copy(store: Store, table: str, columns: list[str], rows: Iterator[tuple[Any, ...]]) -> None:
    """COPY … FROM STDIN (text format) in blocks of rows, one transaction for all of them."""
    names = ", ".join(f'"{name}"' for name in columns)
    sql = f'COPY "{table}" ({names}) FROM STDIN'
    cursor = store.db.cursor()
    with store.db.atomic():
        while True:
            lines = []
            for row in rows:
                lines.append("\t".join(_copy_text(value) for value in row))
                if len(lines) == _COPY_ROWS:
                    break
            if not lines:
                return
            cursor.copy_expert(sql, io.StringIO("\n".join(lines) + "\n"))


def _copy_text(value: Any) -> str:
    """One value in COPY's text format."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    text = str(value)
    for raw, escaped in (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r")):
        text = text.replace(raw, escaped)
    return text


def _write_server_side_rows(store: Store, population: Population, columns: list[str]) -> None:
    """What the server keeps beside each work order for the scoped feed, where it keeps
    anything (`scope_entry`: one row per scope key of each work order, at its change number,
    the keys from the server's own `server.scope.keys.record_keys`)."""
    entries_table = getattr(store.tables, "ScopeEntry", None)
    try:
        from server.scope.keys import record_keys  # the rules of the server that keeps entries
    except ImportError:
        return  # no scoped feed: it reads work_order itself
    if entries_table is None:
        return

    at = {name: columns.index(name) for name in ("id", "assignee", "team", "created_by", "seq")}

    def entries() -> Iterator[tuple[Any, ...]]:
        for row in _rows(population, columns, _columns(store)[1]):
            keys = record_keys(row[at["assignee"]], row[at["team"]], row[at["created_by"]])
            for key in sorted(keys):
                yield (key, row[at["id"]], row[at["seq"]], True)

    names = ["key", "entity_id", "seq", "present"]
    table = entries_table._meta.table_name
    if store.is_postgres:
        _copy(store, table, names, entries())
        store.db.execute_sql(f'ANALYZE "{table}"')
    else:
        _insert_many(store, table, names, entries())


def _add(db_url: str, name: str, role: str, user: str, team: str) -> str:
    """A device of `user` in `team`; where the server has no users yet, the device's name is
    its user (so `new-worker` still matches its work orders' assignee)."""
    if "team" in inspect.signature(provision_device).parameters:
        return provision_device(db_url, name, role, user=user, team=team)  # type: ignore[arg-type, call-arg]
    return provision_device(db_url, name, role)  # type: ignore[arg-type]


def provision(db_url: str, population: Population, drain_devices: int = 50) -> dict[str, str]:
    """Tokens of `new-worker` (no team), `admin`, and the drain devices (`drain-NN`)."""
    tokens = {
        NEW_WORKER: _add(db_url, NEW_WORKER, "worker", NEW_WORKER, ""),
        "admin": _add(db_url, "admin", "admin", "office", ""),
    }
    for name, user, team in population.drain_devices(drain_devices):
        tokens[name] = _add(db_url, name, "worker", user, team)
    return tokens
