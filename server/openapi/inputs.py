"""What the server accepts, exactly: the rules its handlers check by hand, in `/openapi.json`.

FastAPI documents what pydantic checks on the way in; the handlers check more in the wire
contract's own words (a UUID entity id, a usable `Idempotency-Key`, a change token, the shape
of each kind of mutation). `exact_document` writes those rules into the generated document, so
that every request the document allows is one the server accepts and every one it forbids is
refused (schemathesis checks both ways, `tests/chaos/test_fuzz_server.py`). It also adds the
links a client follows from what it created to the operations that take its id.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from app.records import WorkOrder
from server.db.models import BIGINT_MAX, INTEGER_MAX
from server.records.conflicts import STATUSES
from server.settings import Settings
from server.wire import ENTITY_ID_PATTERN

__all__ = [
    "IDEMPOTENCY_KEY_PATTERN",
    "SINCE_PATTERN",
    "WHITESPACE",
    "decimal_at_most",
    "exact_document",
]

#: What `str.strip()` removes (every `c` with `c.isspace()`), spelled out so that a pattern
#: means the same to Python, ECMAScript and Rust regex engines (their `\s` differ).
WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_SPACES = r"\t\n\x0b\x0c\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# app.records.printable: no control character but tab and line breaks.
_PRINTABLE = r"[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"
_PRINTABLE_NOT_SPACE = rf"[^\x00-\x1f\x7f{_SPACES}]"
_KEY_CHAR = r"[^\x00-\x1f\x7f]"

PRINTABLE_PATTERN = rf"^{_PRINTABLE}*$"
#: A title has something besides whitespace (`title must not be blank`).
NOT_BLANK_PATTERN = rf"^{_PRINTABLE}*{_PRINTABLE_NOT_SPACE}{_PRINTABLE}*$"
#: server.http.idempotency_key_problem: no control characters, not blank. HTTP strips a
#: header value's outer whitespace, so on the wire a key neither starts nor ends with any.
_KEY_EDGE = rf"[^\x00-\x1f\x7f{_SPACES}]"
IDEMPOTENCY_KEY_PATTERN = rf"^{_KEY_EDGE}(?:{_KEY_CHAR}*{_KEY_EDGE})?$"


def decimal_at_most(limit: int) -> str:
    """A pattern for the decimal strings of at most `len(str(limit))` digits (leading zeros
    allowed, the empty string too) whose value is at most `limit`."""
    digits = str(limit)
    alternatives = [f"[0-9]{{0,{len(digits) - 1}}}"]
    for position, digit in enumerate(digits):
        if digit != "0":
            rest = len(digits) - position - 1
            tail = f"[0-9]{{{rest}}}" if rest else ""
            alternatives.append(f"{digits[:position]}[0-{int(digit) - 1}]{tail}")
    alternatives.append(digits)
    return "^(?:" + "|".join(alternatives) + ")$"


#: server.routes.changes: a change token is a sequence number, 0 to BIGINT_MAX, or empty for 0.
SINCE_PATTERN = decimal_at_most(BIGINT_MAX)

#: server.routes.search: a search cursor is a work order id (or empty: the first page).
_CURSOR_PATTERN = "^(?:|" + ENTITY_ID_PATTERN.removeprefix("^").removesuffix("$") + ")$"

_ENTITY_ID = {
    "type": "string",
    "format": "uuid",
    "pattern": ENTITY_ID_PATTERN,
    "description": "A UUID in its hyphenated form",
}
_IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": True,
    "description": "The client's name for this change; a retry sends the same key and body",
    "schema": {
        "type": "string",
        "minLength": 1,
        "maxLength": 255,
        "pattern": IDEMPOTENCY_KEY_PATTERN,
    },
}


def _field_rules() -> dict[str, dict[str, Any]]:
    """The editable fields as `app.records.WorkOrder` declares them, plus what its validators
    check (printable text, a title that is not blank)."""
    generated = WorkOrder.model_json_schema()["properties"]
    rules: dict[str, dict[str, Any]] = {}
    for name, declared in generated.items():
        rule = {key: value for key, value in declared.items() if key not in ("title", "default")}
        if rule.get("type") == "string" and "enum" not in rule:
            rule["pattern"] = NOT_BLANK_PATTERN if name == "title" else PRINTABLE_PATTERN
        rules[name] = rule
    return rules


#: Text fields an update may set to null, meaning empty (app.records.validate_patch).
_CLEARABLE = ("site", "notes", "assignee", "team")


def _work_order() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "Every editable field; those left out take their defaults",
        "properties": _field_rules(),
        "required": ["title"],
        "additionalProperties": False,
    }


def _patch(description: str, *, min_fields: int = 0) -> dict[str, Any]:
    properties = _field_rules()
    for name in _CLEARABLE:
        properties[name] = {"anyOf": [properties[name], {"type": "null"}]}
    schema: dict[str, Any] = {
        "type": "object",
        "description": description,
        "properties": properties,
        "additionalProperties": False,
    }
    if min_fields:
        schema["minProperties"] = min_fields
    return schema


def _mutation() -> dict[str, Any]:
    def kind(op: str, base_version: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
        required = ["entity_id", "op", *(["base_version"] if op != "create" else [])]
        return {
            "type": "object",
            "title": f"{op.capitalize()}Mutation",
            "properties": {
                "entity_id": _ENTITY_ID,
                "op": {"const": op},
                "base_version": base_version,
                "fields": fields,
            },
            "required": [*required, *(["fields"] if op != "delete" else [])],
            "additionalProperties": False,
        }

    version = {"type": "integer", "minimum": 1, "description": "The version the change is based on"}
    return {
        "description": "One change to one work order, as sent to `POST /v1/mutations`.",
        "oneOf": [
            kind("create", {"type": "null"}, _work_order()),
            kind("update", version, _patch("The fields to change", min_fields=1)),
            kind(
                "delete",
                version,
                {
                    "type": "object",
                    "properties": {"deleted": {"const": True}},
                    "additionalProperties": False,
                },
            ),
        ],
        "discriminator": {"propertyName": "op"},
    }


def _raise_conflict() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "entity_id": _ENTITY_ID,
            "base_version": {
                "anyOf": [
                    {"type": "integer", "minimum": 1, "maximum": INTEGER_MAX},
                    {"type": "null"},
                ]
            },
            "mine": _patch("The worker's values for the fields in question"),
            "base": {
                "anyOf": [
                    _patch("The values the worker's edit started from (optional)"),
                    {"type": "null"},
                ]
            },
            "note": {
                "anyOf": [
                    {"type": "string", "maxLength": 2000, "pattern": PRINTABLE_PATTERN},
                    {"type": "null"},
                ]
            },
        },
        "required": ["entity_id", "mine"],
        "additionalProperties": False,
    }


def _resolution() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "fields": _patch("The merged fields, applied as an update"),
            "base_version": {"type": "integer", "minimum": 1},
        },
        "required": ["fields", "base_version"],
        "additionalProperties": False,
    }


def _batch(settings: Settings) -> dict[str, Any]:
    return {
        "type": "object",
        "description": (
            "Mutations each carrying its own `idempotency_key`. Each item is checked on its own"
            " and answered in `results` with the single endpoint's status and body, so any"
            " object is accepted as an item."
        ),
        "properties": {
            "mutations": {
                "type": "array",
                "maxItems": settings.max_batch_items,
                "items": {
                    "type": "object",
                    "description": "A Mutation plus its `idempotency_key`",
                },
            }
        },
        "required": ["mutations"],
    }


_CONFLICT_ID = "$response.body#/conflict/id"
_RECORD_ID = "$response.body#/record/id"


def _links(operation_id: Callable[[str, str], str]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(method, path, status) -> the links of that answer."""

    def to(method: str, path: str, description: str, **extra: Any) -> dict[str, Any]:
        return {"operationId": operation_id(method, path), "description": description, **extra}

    one = "/v1/conflicts/{conflict_id}"
    conflict = {"conflict_id": _CONFLICT_ID}
    created_conflict = {
        "GetConflict": to("get", one, "Read the conflict raised", parameters=conflict),
        "ResolveConflict": to(
            "post",
            f"{one}/resolve",
            "Resolve it with the worker's values against the server's version",
            parameters=conflict,
            requestBody={
                "fields": "$response.body#/conflict/mine",
                "base_version": "$response.body#/conflict/server/version",
            },
        ),
        "DismissConflict": to("post", f"{one}/dismiss", "Dismiss it", parameters=conflict),
    }
    record = {
        "GetRecord": to(
            "get",
            "/v1/records/{entity_id}",
            "Read the record",
            parameters={"entity_id": _RECORD_ID},
        ),
        "RaiseConflict": to(
            "post",
            "/v1/conflicts",
            "Send a change of this record for review",
            requestBody={
                "entity_id": _RECORD_ID,
                "base_version": "$response.body#/record/version",
            },
        ),
    }
    changed = {
        "UpdateChanged": to(
            "post",
            "/v1/mutations",
            "Change the first record the page delivered",
            requestBody={
                "entity_id": "$response.body#/changes/0/id",
                "op": "update",
                "base_version": "$response.body#/changes/0/version",
                "fields": {"status": "in_progress"},
            },
            # The whole body: merged into a generated one it could be a create with a version.
            **{"x-schemathesis": {"merge_body": False}},
        )
    }
    return {
        ("get", "/v1/changes", "200"): changed,
        ("post", "/v1/conflicts", "201"): created_conflict,
        ("post", "/v1/mutations", "201"): record,
        ("post", "/v1/mutations", "200"): record,
    }


def _set_parameter(operation: dict[str, Any], parameter_name: str, **changes: Any) -> None:
    """Replace what FastAPI wrote for a parameter; fails loudly if it has none."""
    [parameter] = [item for item in operation["parameters"] if item["name"] == parameter_name]
    parameter.update(changes)


def _drop_null(operation: dict[str, Any]) -> None:
    """An optional parameter is left out, never sent as null: FastAPI's `anyOf [T, null]`
    for `T | None` parameters would let a client think `null` is a value it can send."""
    for parameter in operation.get("parameters", []):
        alternatives = parameter["schema"].get("anyOf")
        if alternatives and {"type": "null"} in alternatives:
            kept = [schema for schema in alternatives if schema != {"type": "null"}]
            extra = {k: v for k, v in parameter["schema"].items() if k != "anyOf"}
            parameter["schema"] = {**kept[0], **extra} if len(kept) == 1 else parameter["schema"]


#: server.routes.uploads: an upload id is 32 lowercase hex digits.
UPLOAD_ID_PATTERN = "^[0-9a-f]{32}$"
_TUS_RESUMABLE = {"required": True, "schema": {"type": "string", "enum": ["1.0.0"]}}
_OCTETS = {"schema": {"type": "string", "format": "binary"}}


def _upload_rules(paths: dict[str, Any], settings: Settings) -> None:
    """The tus routes' headers as `server.routes.uploads` reads them."""
    created, one = paths["/v1/uploads"], paths["/v1/uploads/{upload_id}"]
    for operation in (created["post"], *one.values()):
        _set_parameter(operation, "Tus-Resumable", **_TUS_RESUMABLE)
    for operation in one.values():
        _set_parameter(
            operation, "upload_id", schema={"type": "string", "pattern": UPLOAD_ID_PATTERN}
        )
    _set_parameter(
        created["post"],
        "Upload-Length",
        required=True,
        description="The file's size in bytes",
        schema={"type": "string", "pattern": _upload_length(settings)},
    )
    _set_parameter(
        created["post"],
        "Upload-Metadata",
        required=True,
        description=(
            "`key base64(value)` pairs, comma-separated: attachment_id (a UUID, the"
            " attachment's idempotency key), entity_id, filename, content_type, sha256 (hex)"
        ),
        schema={"type": "string"},
    )
    created["post"]["requestBody"] = {
        "required": False,
        "description": "creation-with-upload: the first bytes of the file",
        "content": {"application/offset+octet-stream": _OCTETS},
    }
    one["patch"]["requestBody"] = {
        "required": True,
        "content": {"application/offset+octet-stream": _OCTETS},
    }
    _set_parameter(
        one["patch"],
        "Upload-Checksum",
        schema={"type": "string", "pattern": "^sha256 [A-Za-z0-9+/]{43}=$"},
    )
    attachment_paths = [path for path in paths if path.startswith("/v1/attachments/")]
    for path in attachment_paths:
        for operation in paths[path].values():
            _set_parameter(operation, "attachment_id", schema=_ENTITY_ID)
    _set_parameter(
        paths["/v1/attachments/{attachment_id}"]["delete"], "Idempotency-Key", **_IDEMPOTENCY_KEY
    )


def _upload_length(settings: Settings) -> str:
    """Digits of a number at most `max_upload_bytes` (an empty value is no length)."""
    return decimal_at_most(settings.max_upload_bytes).replace("{0,", "{1,", 1)


def exact_document(generated: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """FastAPI's document for this server, with the hand-checked rules and the links added."""
    document = copy.deepcopy(generated)
    paths = document["paths"]
    for operations in paths.values():
        for operation in operations.values():
            _drop_null(operation)

    def operation_id(method: str, path: str) -> str:
        found: str = paths[path][method]["operationId"]
        return found

    mutations, conflicts = paths["/v1/mutations"]["post"], paths["/v1/conflicts"]["post"]
    for keyed in (mutations, conflicts):
        _set_parameter(keyed, "Idempotency-Key", **_IDEMPOTENCY_KEY)
    _set_parameter(
        paths["/v1/changes"]["get"],
        "since",
        schema={"type": "string", "pattern": SINCE_PATTERN},
    )
    _set_parameter(
        paths["/v1/conflicts"]["get"],
        "status",
        schema={"type": "string", "enum": list(STATUSES)},
    )
    _set_parameter(paths["/v1/records/{entity_id}"]["get"], "entity_id", schema=_ENTITY_ID)
    for method in ("post", "delete"):
        _set_parameter(paths["/v1/pins/{entity_id}"][method], "entity_id", schema=_ENTITY_ID)
    search = paths["/v1/records"]["get"]
    _set_parameter(
        search, "q", schema={"type": "string", "minLength": 1, "maxLength": 200,
                             "pattern": NOT_BLANK_PATTERN},
    )  # fmt: skip
    _set_parameter(search, "cursor", schema={"type": "string", "pattern": _CURSOR_PATTERN})

    _upload_rules(paths, settings)

    schemas = document["components"]["schemas"]
    for method, path, body in (
        ("post", "/v1/mutations", _mutation()),
        ("post", "/v1/mutations/batch", _batch(settings)),
        ("post", "/v1/conflicts", _raise_conflict()),
        ("post", "/v1/conflicts/{conflict_id}/resolve", _resolution()),
    ):
        content = paths[path][method]["requestBody"]["content"]["application/json"]
        schemas[content["schema"]["$ref"].rsplit("/", 1)[-1]] = body

    for (method, path, status), links in _links(operation_id).items():
        paths[path][method]["responses"][status]["links"] = links
    return document
