"""The change log of work orders: who changed which fields, when and from where, per change.

Written where a change is applied (`apply_mutation`, `update_record`, the batch), in its
transaction, so a rolled-back change leaves no entry and an idempotent replay, which applies
nothing, adds none.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from app.records import EDITABLE_FIELDS

if TYPE_CHECKING:
    from server.auth import AuthenticatedDevice
    from server.db.store import Store

__all__ = [
    "LOG_COLUMNS",
    "Author",
    "changed_fields",
    "created_fields",
    "fields_json",
    "log_entry",
    "write_log",
]

#: The change log's columns, in the order `write_log` sends them.
LOG_COLUMNS: tuple[str, ...] = (
    "entity_id", "version", "at", "device_id", "device", "actor", "source", "kind", "fields",
)  # fmt: skip


@dataclass(frozen=True)
class Author:
    """Who makes a change: the person, the device it came from (if any), and the way in."""

    actor: str
    source: str = "device"  # "device" | "console" | "conflict"
    device_id: int | None = None
    device: str = ""

    @classmethod
    def of_device(cls, device: AuthenticatedDevice) -> Author:
        return cls(device.user or device.name, "device", device.id, device.name)

    @classmethod
    def deciding(cls, admin: AuthenticatedDevice) -> Author:
        """An admin deciding a conflict: from a device, or from the console (id 0)."""
        if admin.id:
            return cls(admin.user or admin.name, "conflict", admin.id, admin.name)
        return cls(admin.name.removesuffix(" (console)"), "conflict")


def created_fields(fields: Mapping[str, Any]) -> dict[str, list[Any]]:
    """A create's fields as `{name: [None, value]}`."""
    return {name: [None, fields[name]] for name in EDITABLE_FIELDS if name in fields}


def changed_fields(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, list[Any]]:
    """`{name: [before, after]}` for the editable fields whose value changed."""
    return {
        name: [before[name], after[name]]
        for name in EDITABLE_FIELDS
        if name in after and before[name] != after[name]
    }


def log_entry(
    author: Author, entity_id: str, version: int, at: str, fields: dict[str, list[Any]]
) -> tuple[Any, ...]:
    """One row of the log, its kind read from the change: create, delete or update."""
    if version == 1:
        kind = "create"
    elif fields.get("deleted", [False, False])[1]:
        kind = "delete"
    else:
        kind = "update"
    return (entity_id, version, at, author.device_id, author.device, author.actor,
            author.source, kind, fields_json(fields))  # fmt: skip


def fields_json(fields: dict[str, list[Any]]) -> str:
    """The stored text of an entry's fields: sorted, compact, UTF-8 (orjson's, several times
    faster than the standard library's for each item of a batch; it answers what orjson
    refuses). Read back with `json.loads`; the console shows it as it always did."""
    try:
        return orjson.dumps(fields, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # a lone surrogate, an integer past 64 bits
        return json.dumps(fields, sort_keys=True, ensure_ascii=False)


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def write_log(store: Store, entries: Sequence[tuple[Any, ...]]) -> None:
    """Insert `entries` in multi-row statements (inside the change's transaction)."""
    table = f'"{store.tables.WorkOrderChange._meta.table_name}"'
    names = ", ".join(f'"{name}"' for name in LOG_COLUMNS)
    width = len(LOG_COLUMNS)
    for chunk in _chunks(entries, store.rows_per_statement(width)):
        sql = f"INSERT INTO {table} ({names}) VALUES {store.values_list(len(chunk), width)}"
        store.db.execute_sql(sql, [value for entry in chunk for value in entry])
