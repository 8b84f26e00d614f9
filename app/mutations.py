"""The mutation contract: what a create, an update or a delete of a work order may carry.

One set of rules and one wording, for everyone who checks or reads a mutation: the store
(before it queues an edit), the server (before it applies one), the dead-letter form (an edited
payload), the editor, delivery, conflicts and the cache. The field rules themselves are the
record schema's (`app.records`); this module adds the envelope rules around them, the words the
server answers with when they are broken, and what a queued payload means to set.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from app.records import (
    HYPHENATED_UUID,
    Op,
    WorkOrder,
    WorkOrderPatch,
    normalized_create,
    normalized_patch,
)

__all__ = [
    "BASE_FORBIDDEN_FOR_CREATE",
    "BASE_REQUIRED",
    "DELETE_TAKES_NO_FIELDS",
    "NEEDS_ENTITY_ID",
    "NOT_AN_ENTITY_ID",
    "OPS",
    "UNKNOWN_OP",
    "UPDATE_NEEDS_FIELDS",
    "CheckedMutation",
    "canonical_entity_id",
    "intended_fields",
    "validate_mutation",
]

OPS: Final[tuple[Op, ...]] = ("create", "update", "delete")

# The server's words (the ``detail`` of a 422 ``invalid_payload``), used by every checker.
#: An update that sets nothing.
UPDATE_NEEDS_FIELDS: Final = "update needs at least one field"
#: A delete that carries fields (``{"deleted": true}`` is tolerated: it says the same).
DELETE_TAKES_NO_FIELDS: Final = "delete takes no fields"
#: A create sent against a version (a new record has none).
BASE_FORBIDDEN_FOR_CREATE: Final = "base_version must be null for create"
#: An update or delete without the version it was made on; ``{op}`` names the operation.
BASE_REQUIRED: Final = "base_version is required for {op}"
#: An operation that is none of create, update, delete; ``{op}`` is what was given.
UNKNOWN_OP: Final = "unknown operation {op!r}: use create, update or delete"
#: An update or delete that names no work order; ``{op}`` names the operation.
NEEDS_ENTITY_ID: Final = "{op} needs a work-order id"
#: An id that is not a UUID; ``{value!r}`` is what was given.
NOT_AN_ENTITY_ID: Final = "{value!r} is not a work-order id (a UUID)"


@dataclass(frozen=True)
class CheckedMutation:
    """A mutation that keeps the contract: ``fields`` are what is queued and sent (a create's
    with defaults filled in, an update's as given, normalized; a delete's empty)."""

    op: Op
    #: Canonical (lowercase, hyphenated); None for a create whose id is still to be made.
    entity_id: str | None
    fields: dict[str, Any]

    def intended(self) -> dict[str, Any]:
        """The fields this mutation means to set (see `intended_fields`)."""
        return intended_fields({"op": self.op, "fields": self.fields})


def canonical_entity_id(value: str) -> str:
    """A work-order id as the server writes it: ``{ABC…}`` and ``abc…`` are one work order.
    Raises ValueError (``NOT_AN_ENTITY_ID``) for anything that is not a UUID."""
    if HYPHENATED_UUID.fullmatch(value):
        return value.lower()  # what str(uuid.UUID(value)) writes, without parsing it
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise ValueError(NOT_AN_ENTITY_ID.format(value=value)) from None


def validate_mutation(
    op: str,
    entity_id: str | None,
    fields: Mapping[str, Any],
    *,
    parsed: WorkOrder | WorkOrderPatch | None = None,
) -> CheckedMutation:
    """Check one mutation against the contract and return it normalized.

    Raises ``pydantic.ValidationError`` when a field breaks the record schema (the server
    answers those with pydantic's detail list) and ValueError with one of this module's words
    when the envelope is wrong. Base versions are the sender's business (the store fills in
    the cached one, the server checks them against ``BASE_*``). ``parsed``: the fields as a
    stricter reader already parsed them (the server's, in JSON's own types), used instead of
    parsing them again; a model of the other operation's kind is ignored.
    """
    if op not in OPS:
        raise ValueError(UNKNOWN_OP.format(op=op))
    if entity_id:
        entity_id = canonical_entity_id(entity_id)
    elif op != "create":
        raise ValueError(NEEDS_ENTITY_ID.format(op=op))
    else:
        entity_id = None
    given = dict(fields)
    if op == "create":
        work_order = parsed if isinstance(parsed, WorkOrder) else WorkOrder.model_validate(given)
        return CheckedMutation("create", entity_id, normalized_create(work_order))
    if op == "update":
        if not isinstance(parsed, WorkOrderPatch):
            parsed = WorkOrderPatch.model_validate(given)
        clean = normalized_patch(parsed)
        if not clean:
            raise ValueError(UPDATE_NEEDS_FIELDS)
        return CheckedMutation("update", entity_id, clean)
    if given not in ({}, {"deleted": True}):
        raise ValueError(DELETE_TAKES_NO_FIELDS)
    return CheckedMutation("delete", entity_id, {})


def intended_fields(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The fields a queued payload (``{"op": …, "fields": {…}}``) means to set on the record:
    a delete sets ``deleted``; a create or an update sets the fields it carries."""
    if payload.get("op") == "delete":
        return {"deleted": True}
    return dict(payload.get("fields") or {})
