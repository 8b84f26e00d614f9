"""Finding work orders by text (`GET /v1/records?q=`): title, site or assignee contains it.

The meaning is the LIKE scan's, on both backends: a work order (not deleted) matches when one
of the three fields contains `q` as a substring, case folded as the backend's LIKE folds it
(SQLite: ASCII letters; PostgreSQL: ILIKE). Matches come in id order after a cursor. Only the
way there differs (the indexes come from server/db/search_index.py):

- PostgreSQL runs the same ILIKE query; pg_trgm's GIN indexes answer it, and the planner
  still walks the id index when a term is so common that the first page is near.
- SQLite's planner cannot use an FTS5 table for LIKE with ESCAPE, so a `q` of three or more
  characters asks the trigram table for its candidates (MATCH of the phrase, which folds case
  at least as widely as LIKE) and the LIKE above keeps exactly today's results. Candidates
  come in change order, not id order, so a common term would fetch every match to sort them:
  a bounded look at the next rows in id order answers those first. Under three characters
  a trigram index has nothing to look up, and the scan it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from server.db.store import Store
from server.records.mutations import WIRE_FIELDS
from server.scope.keys import Scope

__all__ = ["COLUMNS", "SEARCHED", "find_work_orders"]

COLUMNS = (*WIRE_FIELDS, "created_by")
SEARCHED = ("title", "site", "assignee")
#: Rows after the cursor looked at in id order before asking the trigram index: a term found
#: in more than about one row in ten fills a page of 50 from them.
_NEAR_ROWS = 500
#: The shortest `q` a trigram index can look up.
_TRIGRAM = 3


def _like(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _phrase(text: str) -> str:
    """`text` as one FTS5 phrase: every character literal."""
    return '"' + text.replace('"', '""') + '"'


class _Query:
    """The WHERE clause every path shares, over the work-order table named `alias`."""

    def __init__(self, store: Store, text: str, after: str, scope: Scope | None, alias: str):
        param = store.db.param
        like = "ILIKE" if store.is_postgres else "LIKE"  # SQLite's LIKE ignores ASCII case
        match = " OR ".join(f"{alias}.\"{name}\" {like} {param} ESCAPE '\\'" for name in SEARCHED)
        self.where = [f'{alias}."id" > {param}', f'NOT {alias}."deleted"', f"({match})"]
        self.params: list[Any] = [after, *[_like(text)] * len(SEARCHED)]
        if scope is not None:
            pins = f'"{store.tables.Pin._meta.table_name}"'
            self.where.append(
                f'({alias}."assignee" = {param} OR {alias}."created_by" = {param} OR '
                f'({alias}."team" <> \'\' AND {alias}."team" = {param}) OR {alias}."id" IN '
                f'(SELECT "entity_id" FROM {pins} WHERE "user_name" = {param}))'
            )
            self.params += [scope.user, scope.user, scope.team, scope.user]
        self.columns = ", ".join(f'{alias}."{name}"' for name in COLUMNS)

    def clause(self) -> str:
        return " AND ".join(self.where)


def _rows(store: Store, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    return [dict(zip(COLUMNS, values, strict=True)) for values in store.db.execute_sql(sql, params)]


def find_work_orders(
    store: Store,
    text: str,
    after: str,
    count: int,
    scope: Scope | None = None,
    *,
    indexed: bool = True,
) -> list[dict[str, Any]]:
    """The first `count` matches of `text` with an id above `after`, in id order; only those
    `scope` holds when it is given. `indexed=False` is the plain LIKE scan (the benchmark's
    baseline, and what a too-short `text` gets anyway)."""
    orders = f'"{store.tables.WorkOrder._meta.table_name}"'
    param = store.db.param
    query = _Query(store, text, after, scope, orders)
    scan = (
        f"SELECT {query.columns} FROM {orders} WHERE {query.clause()} "
        f'ORDER BY {orders}."id" LIMIT {param}'
    )
    if store.is_postgres:
        if not indexed:
            with store.db.atomic():  # GIN indexes are read by bitmap scans only
                store.db.execute_sql("SET LOCAL enable_bitmapscan = off")
                return _rows(store, scan, [*query.params, count])
        return _rows(store, scan, [*query.params, count])
    if not indexed or len(text) < _TRIGRAM:
        return _rows(store, scan, [*query.params, count])
    near = (
        f'SELECT {query.columns} FROM (SELECT * FROM {orders} WHERE {orders}."id" > {param} '
        f'ORDER BY "id" LIMIT {param}) AS {orders} WHERE {query.clause()} '
        f'ORDER BY {orders}."id" LIMIT {param}'
    )
    found = _rows(store, near, [after, _NEAR_ROWS, *query.params, count])
    if len(found) == count:
        return found  # the first `count` matches all lie among the next rows
    index = f'"{store.tables.WorkOrder._meta.table_name}_search"'
    # CROSS JOIN keeps the index's candidates the outer loop (SQLite plans joins in that order).
    indexed_sql = (
        f"SELECT {query.columns} FROM {index} CROSS JOIN {orders} "
        f'ON {orders}."seq" = {index}."rowid" WHERE {index} MATCH {param} '
        f'AND {query.clause()} ORDER BY {orders}."id" LIMIT {param}'
    )
    return _rows(store, indexed_sql, [_phrase(text), *query.params, count])
