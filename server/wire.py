"""The wire's own rules for what a client sends: JSON types as declared, ids in one spelling.

pydantic's lax mode, right for the device's own forms, reads more into JSON than it says:
`"yes"` as true, `0` or `"0"` as 1970-01-01, `true` as version 1; `uuid.UUID` reads a UUID
without hyphens, in braces or behind `urn:uuid:`. The server takes exactly what
`/openapi.json` documents (`server/openapi/inputs.py` writes it from the patterns here).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, TypeVar

import orjson
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError

from app import records
from app.mutations import DELETE_TAKES_NO_FIELDS
from app.records import (
    HYPHENATED_UUID,
    UUID_PATTERN,
    WorkOrder,
    WorkOrderPatch,
    normalized_patch,
)

__all__ = [
    "ENTITY_ID_PATTERN",
    "JsonInteger",
    "Mutation",
    "UrlInteger",
    "check_created_fields",
    "check_json_types",
    "check_wire_fields",
    "patch_fields",
    "wire_entity_id",
]

#: The string form of RFC 9562, any case.
ENTITY_ID_PATTERN = UUID_PATTERN


def _integer(value: object) -> object:
    """JSON has one number type: `3.0` is the integer 3 (JSON Schema says so too), `true` and
    `"3"` are not numbers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: An integer as JSON writes it; use in a strict model.
JsonInteger = Annotated[int, BeforeValidator(_integer)]


def _written_in_digits(value: object) -> object:
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("must be written in digits")
    return value


#: A number in a URL (path or query) is ASCII digits; pydantic also reads " 1", "+1", "1_0"
#: and "1.0". Put it after `Path()`/`Query()` in the `Annotated`, or FastAPI's document loses
#: the parameter's bounds.
UrlInteger = BeforeValidator(_written_in_digits)


class Mutation(records.Mutation):
    """`app.records.Mutation` as the wire carries it: JSON's types as sent."""

    model_config = ConfigDict(extra="forbid", strict=True)

    base_version: JsonInteger | None = Field(default=None, ge=1)


def wire_entity_id(text: object) -> str | None:
    """The stored spelling (lowercase) of a hyphenated UUID, or None for anything else."""
    if isinstance(text, str) and HYPHENATED_UUID.fullmatch(text):
        return text.lower()
    return None


#: Values orjson writes as the same JSON document as the standard library (it writes NaN as
#: null, which pydantic would read as another value).
_PLAIN = frozenset({str, int, bool, type(None)})


def _plain(value: dict[str, Any]) -> bool:
    """Whether every value is text, an integer, a boolean or null (orjson writes it then)."""
    return all(type(item) in _PLAIN for item in value.values())


def _json_text(value: dict[str, Any]) -> str | bytes:
    """`value` as JSON text: orjson's (several times faster, for every mutation of a batch)
    when `_plain`, else the standard library's."""
    if _plain(value):
        try:
            return orjson.dumps(value)
        except TypeError:  # an integer past 64 bits, a lone surrogate
            pass
    return json.dumps(value)


_Model = TypeVar("_Model", bound=BaseModel)


def check_json_types(model: type[_Model], value: dict[str, Any]) -> _Model:
    """`value` parsed as `model`; raise pydantic's `ValidationError` unless every value has the
    JSON type `model` declares (pydantic's strict JSON mode: a date is a `YYYY-MM-DD` string, a
    boolean is true or false)."""
    return model.model_validate_json(_json_text(value), strict=True)


#: Many creates' fields at once, read as `check_json_types` reads each.
_CREATES = TypeAdapter(list[WorkOrder])


def check_created_fields(creates: list[dict[str, Any]]) -> list[WorkOrder] | None:
    """Each create's fields parsed as `check_wire_fields` parses them, in one pass (one
    pydantic call for a batch's hundreds instead of one each); None unless every one of them
    is plain JSON (text, integers, booleans, null) and passes, so that the caller reads
    them one by one and learns which failed, and why."""
    if not all(_plain(fields) for fields in creates):
        return None
    try:
        return _CREATES.validate_json(orjson.dumps(creates), strict=True)
    except (TypeError, ValidationError):  # TypeError: past 64 bits, a lone surrogate
        return None


def check_wire_fields(op: str, fields: dict[str, Any]) -> WorkOrder | WorkOrderPatch | None:
    """A create's or an update's fields parsed (for `app.mutations.validate_mutation`), None
    for a delete; raise pydantic's `ValidationError` for a value of another JSON type than the
    field's, ValueError for a delete whose fields are not `{}` or `{"deleted": true}`
    (`1 == True`)."""
    if op == "create":
        return check_json_types(WorkOrder, fields)
    if op == "update":
        return check_json_types(WorkOrderPatch, fields)
    if fields.keys() - {"deleted"} or fields.get("deleted", True) is not True:
        raise ValueError(DELETE_TAKES_NO_FIELDS)
    return None


def patch_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """`app.records.validate_patch` on exactly typed JSON."""
    return normalized_patch(check_json_types(WorkOrderPatch, fields))
