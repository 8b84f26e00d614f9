"""Applying one validated mutation to a work order: create, patch or tombstone, version-checked.

Runs inside `Store.write_transaction`: the work order is read locked (SQLite's single writer,
PostgreSQL's row lock), so the read-check-write below cannot interleave with another writer
of it; the `WHERE version = base_version` on the update is a second guard that turns any
such bug into a conflict instead of a lost update. Two creates of one id meet at the primary
key: the second waits for the first and answers as a conflict.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app import mutations as contract
from app.mutations import BASE_FORBIDDEN_FOR_CREATE, BASE_REQUIRED
from app.records import EDITABLE_FIELDS, ValidationError, normalized_create
from server.access import Action, Allowed
from server.db.idempotency import Reply
from server.db.models import WorkOrderRow
from server.db.store import ChangeSequence, Store
from server.records.history import Author, changed_fields, created_fields, log_entry, write_log
from server.wire import Mutation, check_created_fields, check_wire_fields, wire_entity_id

if TYPE_CHECKING:
    from server.gate import Gate

__all__ = [
    "WIRE_FIELDS",
    "InvalidMutation",
    "ValidMutation",
    "apply_mutation",
    "conflict_reply",
    "editable",
    "now_iso",
    "record_columns_json",
    "record_json",
    "stamp",
    "validate_creates",
    "validate_mutation",
]


class InvalidMutation(Exception):
    """The mutation cannot be applied as sent (422 invalid_payload)."""

    def __init__(self, detail: Any) -> None:
        super().__init__(str(detail))
        self.detail = detail


@dataclass(frozen=True)
class ValidMutation:
    """A mutation whose envelope and fields passed validation; `fields` are normalized."""

    entity_id: str
    op: str
    base_version: int | None
    fields: dict[str, Any]

    def canonical(self) -> dict[str, Any]:
        return {
            "entity_id": self.entity_id,
            "op": self.op,
            "base_version": self.base_version,
            "fields": self.fields,
        }


def now_iso() -> str:
    """Server time as ISO 8601 UTC with a `Z`, millisecond precision."""
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def validation_detail(error: ValidationError | ValueError) -> Any:
    if isinstance(error, ValidationError):
        return [
            {"loc": list(item["loc"]), "msg": item["msg"], "type": item["type"]}
            for item in error.errors(include_url=False, include_context=False)
        ]
    return str(error)


def validate_mutation(raw: Any) -> ValidMutation:
    """Check the envelope and the fields of a mutation; raise `InvalidMutation` with details.

    The rules and their words are the contract's (`app.mutations`), the device's own;
    `server.wire` first holds the JSON to the types and spellings `/openapi.json` documents."""
    try:
        mutation = Mutation.model_validate(raw)
    except ValidationError as error:
        raise InvalidMutation(validation_detail(error)) from None
    if wire_entity_id(mutation.entity_id) is None:
        issue = {"loc": ["entity_id"], "msg": "Value error, entity_id must be a UUID"}
        raise InvalidMutation([{**issue, "type": "value_error"}])
    if mutation.op == "create":
        if mutation.base_version is not None:
            raise InvalidMutation(BASE_FORBIDDEN_FOR_CREATE)
    elif mutation.base_version is None:
        raise InvalidMutation(BASE_REQUIRED.format(op=mutation.op))
    try:
        parsed = check_wire_fields(mutation.op, mutation.fields)
        checked = contract.validate_mutation(
            mutation.op, mutation.entity_id, mutation.fields, parsed=parsed
        )
    except (ValidationError, ValueError) as error:
        raise InvalidMutation(validation_detail(error)) from None
    assert checked.entity_id is not None  # the envelope requires one
    fields = checked.fields if checked.op == "create" else checked.intended()
    return ValidMutation(checked.entity_id, checked.op, mutation.base_version, fields)


#: A create as devices send it: these keys (`base_version` may be left out) and no other.
_CREATE_SHAPES = (
    frozenset({"entity_id", "op", "fields"}),
    frozenset({"entity_id", "op", "base_version", "fields"}),
)


def validate_creates(items: Sequence[Mapping[str, Any]]) -> list[ValidMutation | None]:
    """What `validate_mutation` answers for each item that is a plain create, found for all of
    them at once; None for the other items.

    New work orders are what a device sends most, by the hundred after a day offline. Their
    fields go through the one strict reader `validate_mutation` uses (`server.wire`) in one
    pass instead of three pydantic calls each. An item of another shape, and every create
    when any create's fields do not pass, is left (None) to `validate_mutation`, whose error
    says which and why."""
    positions: list[int] = []
    entity_ids: list[str] = []
    fields: list[dict[str, Any]] = []
    for position, raw in enumerate(items):
        entity_id, given = raw.get("entity_id"), raw.get("fields")
        if (
            raw.keys() in _CREATE_SHAPES
            and raw["op"] == "create"
            and raw.get("base_version") is None
            and type(given) is dict
            and (canonical := wire_entity_id(entity_id)) is not None
        ):
            positions.append(position)
            entity_ids.append(canonical)
            fields.append(given)
    valid: list[ValidMutation | None] = [None] * len(items)
    parsed = check_created_fields(fields) if fields else None
    if parsed is not None:
        for position, entity_id, order in zip(positions, entity_ids, parsed, strict=True):
            valid[position] = ValidMutation(entity_id, "create", None, normalized_create(order))
    return valid


#: The fields of a work order on the wire, in order (`seq` stays on the server).
WIRE_FIELDS: tuple[str, ...] = ("id", *EDITABLE_FIELDS, "version", "updated_at", "updated_by")


def record_json(row: WorkOrderRow) -> dict[str, Any]:
    """The wire form of a work order."""
    return record_columns_json({name: getattr(row, name) for name in WIRE_FIELDS})


def record_columns_json(columns: Mapping[str, Any]) -> dict[str, Any]:
    """The wire form of a work order held as column values."""
    body = {name: columns[name] for name in WIRE_FIELDS}
    body["deleted"] = bool(body["deleted"])
    return body


def conflict_reply(row: WorkOrderRow) -> Reply:
    return Reply(409, {"error": "version_conflict", "current": record_json(row)})


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f'"{name}"' for name in names)


def _get(store: Store, entity_id: str) -> WorkOrderRow | None:
    """The work order, locked against other writers until the transaction ends."""
    # Hand-written: peewee building this SELECT cost more than SQLite answering it.
    table = store.tables.WorkOrder
    names = table._meta.sorted_field_names
    sql = f'SELECT {_quoted(names)} FROM "{table._meta.table_name}" WHERE "id" = {store.db.param}'
    found = store.db.execute_sql(sql + " FOR UPDATE" if store.is_postgres else sql, [entity_id])
    values = found.fetchone()
    if values is None:
        return None
    row = table(**dict(zip(names, values, strict=True)))
    row.deleted = bool(row.deleted)  # SQLite hands back 0/1
    return row


def _insert_new(store: Store, values: Mapping[str, Any]) -> bool:
    """Insert a work order unless its id exists (False then): no savepoint, on either backend."""
    names = list(values)
    sql = (
        f'INSERT INTO "{store.tables.WorkOrder._meta.table_name}" '
        f"({_quoted(names)}) "
        f'VALUES {store.values_list(1, len(names))} ON CONFLICT ("id") DO NOTHING'
    )
    return bool(store.db.execute_sql(sql, [values[name] for name in names]).rowcount)


def apply_mutation(
    store: Store,
    mutation: ValidMutation,
    device_name: str,
    sequence: ChangeSequence,
    *,
    creator: str,
    gate: Gate | None = None,
    author: Author | None = None,
) -> Reply:
    """Apply inside a write transaction; the reply is what the device gets (and what is stored).

    `creator` is the user of the device (a created work order stays in its scope); `gate`
    asks the access rule (server/access.py) whether the device may write an existing work
    order, which it may not see otherwise, and remembers what the reply sends it. `author`
    goes into the change log (by default the creator on the device named `device_name`)."""
    author = author or Author(creator, "device", None, device_name)
    reply = _apply(store, mutation, device_name, sequence, creator, gate, author)
    if gate is not None:
        gate.sent_reply(reply.body)
        gate.flush()
    return reply


def _apply(
    store: Store,
    mutation: ValidMutation,
    device_name: str,
    sequence: ChangeSequence,
    creator: str,
    gate: Gate | None,
    author: Author,
) -> Reply:
    if mutation.op == "create":
        # Inserted first: a new id (nearly every create) costs no read.
        values = {
            **mutation.fields,
            "id": mutation.entity_id,
            "created_by": creator,
            **stamp(1, device_name, sequence),
        }
        if _insert_new(store, values):
            sequence.note_fresh(
                values["seq"], mutation.entity_id, values["assignee"], values["team"], creator
            )
            at = values["updated_at"]
            entry = log_entry(author, mutation.entity_id, 1, at, created_fields(values))
            write_log(store, [entry])
            return Reply(201, {"record": record_columns_json(values)})
        sequence.rewind(values["seq"] - 1)  # nothing was written at that number
        existing = _get(store, mutation.entity_id)
        if existing is None:
            raise LookupError(mutation.entity_id)
        if not writable(gate, existing, mutation.base_version):
            return Reply(404, {"error": "not_found"})
        return conflict_reply(existing)
    current = _get(store, mutation.entity_id)
    if current is not None and not writable(gate, current, mutation.base_version):
        return Reply(404, {"error": "not_found"})
    if current is None:
        return Reply(404, {"error": "not_found"})
    if current.version != mutation.base_version:
        return conflict_reply(current)
    return update_record(store, current, mutation.fields, device_name, sequence, author)


def writable(
    gate: Gate | None, current: WorkOrderRow | Mapping[str, Any], base: int | None
) -> bool:
    """Whether the access rule lets the device's change at `current` (a create meeting an
    existing id, an update, a delete) see and touch it."""
    if gate is None:
        return True
    entity_id = current["id"] if isinstance(current, Mapping) else current.id
    return isinstance(gate.order(Action.WRITE, entity_id, current, base), Allowed)


def editable(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The fields a write may change (the rest of a record is the server's)."""
    return {name: value for name, value in fields.items() if name in EDITABLE_FIELDS}


def stamp(
    version: int, device_name: str, sequence: ChangeSequence, at: str | None = None
) -> dict[str, Any]:
    """The columns every write sets: the new version, when (`at`, by default now), by whom,
    and its change number."""
    return {
        "version": version,
        "updated_at": at or now_iso(),
        "updated_by": device_name,
        "seq": sequence.next(),
    }


def update_record(
    store: Store,
    current: WorkOrderRow,
    fields: dict[str, Any],
    device_name: str,
    sequence: ChangeSequence,
    author: Author,
) -> Reply:
    """Write `fields` over `current` as version+1 (a compare-and-set on the version), and
    log the change as `author`'s."""
    table = store.tables.WorkOrder
    changes = {**editable(fields), **stamp(current.version + 1, device_name, sequence)}
    changed = (
        table.update(**changes)
        .where(table.id == current.id, table.version == current.version)
        .execute()
    )
    if not changed:
        return conflict_reply(_require(store, current.id))
    before = {name: getattr(current, name) for name in changes}
    fields_changed = changed_fields(before, changes)
    entry = log_entry(author, current.id, changes["version"], changes["updated_at"], fields_changed)
    write_log(store, [entry])
    for name, value in changes.items():
        setattr(current, name, value)
    return Reply(200, {"record": record_json(current)})


def _require(store: Store, entity_id: str) -> WorkOrderRow:
    row = _get(store, entity_id)
    if row is None:
        raise LookupError(entity_id)
    return row
