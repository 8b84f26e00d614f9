"""Filling a server with many work orders at once, for benchmarks (`benchmarks/scope_bench.py`).

`seed_work_orders` writes rows exactly as the server's own writes leave them: each work order
gets a change number from `Store.write_transaction`, version 1, and its scope entries (the same
`Store.write_transaction` restamps them), in transactions of `chunk` work orders written
with multi-row INSERTs. It is not an API: nothing checks the fields beyond the defaults.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from app.records import work_order_defaults
from server.db.store import open_store
from server.records.mutations import now_iso

__all__ = ["seed_work_orders"]

_DEFAULTS: dict[str, Any] = {
    "title": "Work order",
    **work_order_defaults(),
    "created_by": "",
    "updated_by": "seed",
}
_COLUMNS = (*_DEFAULTS, "id", "version", "updated_at", "seq")


def seed_work_orders(db_url: str, rows: Iterable[Mapping[str, Any]], *, chunk: int = 5000) -> int:
    """Write these work orders (record fields; `id` optional) and return how many."""
    store = open_store(db_url)
    written = 0
    table = f'"{store.tables.WorkOrder._meta.table_name}"'
    names = ", ".join(f'"{name}"' for name in _COLUMNS)
    per_statement = store.rows_per_statement(len(_COLUMNS))
    try:
        source = iter(rows)
        while batch := list(itertools.islice(source, chunk)):
            stamp = now_iso()
            with store.write_transaction() as sequence:
                values = [
                    (
                        *(row.get(name, default) for name, default in _DEFAULTS.items()),
                        row.get("id") or str(uuid.uuid4()),
                        1,
                        stamp,
                        sequence.next(),
                    )
                    for row in batch
                ]
                for start in range(0, len(values), per_statement):
                    part = values[start : start + per_statement]
                    sql = (
                        f"INSERT INTO {table} ({names}) VALUES "
                        f"{store.values_list(len(part), len(_COLUMNS))}"
                    )
                    store.db.execute_sql(sql, [value for row in part for value in row])
            written += len(batch)
    finally:
        store.close()
    return written
