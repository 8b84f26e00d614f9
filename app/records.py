"""The work-order record schema, shared by the device core (`app/`) and the server (`server/`).

One module so that the editor, the command line, the queue and the server validate a work
order with exactly the same rules. Pydantic models reject unknown fields.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

__all__ = [
    "EDITABLE_FIELDS",
    "HYPHENATED_UUID",
    "PAYLOAD_SCHEMA_VERSION",
    "Mutation",
    "Op",
    "Priority",
    "ServerRecord",
    "Status",
    "ValidationError",
    "WorkOrder",
    "WorkOrderPatch",
    "UUID_PATTERN",
    "format_validation_error",
    "normalized_create",
    "normalized_patch",
    "printable",
    "server_record_problem",
    "validate_create",
    "validate_patch",
    "work_order_defaults",
]

#: Version of the mutation payload shape stored in queued jobs. A migration that changes the
#: record shape bumps this and rewrites queued payloads (see app/store/migrations.py).
PAYLOAD_SCHEMA_VERSION = 1

Status = Literal["open", "in_progress", "done", "cancelled"]
Priority = Literal["low", "normal", "high"]
Op = Literal["create", "update", "delete"]

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def printable(value: str) -> str:
    """No control characters but tab and line breaks: PostgreSQL cannot store a NUL, and the
    others only hide text from the person reading it."""
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    return value


Title = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(printable)]
ShortText = Annotated[str, Field(max_length=200), AfterValidator(printable)]
#: A team's name: short, like a user name (`assignee`).
TeamName = Annotated[str, Field(max_length=100), AfterValidator(printable)]
Notes = Annotated[str, Field(max_length=10_000), AfterValidator(printable)]

#: Fields a person (or device) may set; everything else on a record is owned by the server.
EDITABLE_FIELDS: tuple[str, ...] = (
    "title",
    "site",
    "status",
    "priority",
    "notes",
    "assignee",
    "team",
    "due_date",
    "deleted",
)


#: A UUID in its hyphenated string form, any case (RFC 9562's spelling).
UUID_PATTERN = r"^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$"
HYPHENATED_UUID = re.compile(UUID_PATTERN)


def _uuid_text(value: str, name: str) -> str:
    if HYPHENATED_UUID.fullmatch(value):  # nearly every id: a UUID for certain, unparsed
        return value
    try:
        uuid.UUID(value)
    except ValueError:
        raise ValueError(f"{name} must be a UUID") from None
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class WorkOrderPatch(_Strict):
    """A partial set of editable fields (the body of an update)."""

    title: Title | None = None
    site: ShortText | None = None
    status: Status | None = None
    priority: Priority | None = None
    notes: Notes | None = None
    assignee: ShortText | None = None
    team: TeamName | None = None
    due_date: dt.date | None = None
    deleted: bool | None = None

    @field_validator("title")
    @classmethod
    def _title_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("title must not be blank")
        return value


class WorkOrder(_Strict):
    """The editable fields of a full work order (the body of a create)."""

    title: Title
    site: ShortText = ""
    status: Status = "open"
    priority: Priority = "normal"
    notes: Notes = ""
    assignee: ShortText = ""
    team: TeamName = ""
    due_date: dt.date | None = None
    deleted: bool = False

    @field_validator("title")
    @classmethod
    def _title_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("title must not be blank")
        return value


class Mutation(_Strict):
    """One change to one work order, as sent to `POST /v1/mutations`."""

    entity_id: str
    op: Op
    base_version: int | None = Field(default=None, ge=1)
    fields: dict[str, Any] = Field(default_factory=dict)

    _entity_id_is_uuid = field_validator("entity_id")(lambda value: _uuid_text(value, "entity_id"))


class ServerRecord(BaseModel):
    """A record as the server sends it (changes feed, replies, conflicts), checked for what
    the device's cache stores: the types, not the server's rules (a newer server may know
    more statuses). Extra fields are allowed: they are kept in the snapshot and ignored."""

    model_config = ConfigDict(extra="allow", strict=True)

    id: str
    version: int = Field(ge=1)
    title: str
    site: str | None
    status: str
    priority: str
    notes: str | None
    assignee: str | None
    #: Absent from a server older than the `team` field: stored as no team.
    team: str | None = None
    due_date: str | None
    deleted: bool
    updated_at: str | None = None
    updated_by: str | None = None

    _id_is_uuid = field_validator("id")(lambda value: _uuid_text(value, "id"))


def server_record_problem(record: object) -> str | None:
    """Why a record from the server cannot be stored (one line), or None if it can."""
    if not isinstance(record, dict):
        return f"a record must be an object, not {type(record).__name__}"
    try:
        ServerRecord.model_validate(record)
    except ValidationError as exc:
        return f"record {str(record.get('id'))[:40]!r}: {format_validation_error(exc)}"
    return None


def validate_create(fields: dict[str, Any]) -> dict[str, Any]:
    """Validate a full record; return it in JSON form with defaults filled in."""
    return normalized_create(WorkOrder.model_validate(fields))


def normalized_create(work_order: WorkOrder) -> dict[str, Any]:
    """A parsed create's fields in JSON form, defaults filled in (what `validate_create` gives)."""
    return work_order.model_dump(mode="json")


def work_order_defaults() -> dict[str, Any]:
    """The editable fields a create may leave out (all but the title), in JSON form, with the
    values `validate_create` fills in for them."""
    return {
        name: field.default
        for name, field in WorkOrder.model_fields.items()
        if not field.is_required()
    }


def validate_patch(fields: dict[str, Any]) -> dict[str, Any]:
    """Validate a partial record; return only the fields given, in JSON form."""
    return normalized_patch(WorkOrderPatch.model_validate(fields))


def normalized_patch(patch: WorkOrderPatch) -> dict[str, Any]:
    """A parsed patch's fields in JSON form, only those given (what `validate_patch` gives);
    raises ValueError for a null that cannot mean empty."""
    given = patch.model_dump(mode="json", exclude_unset=True)
    for name, value in list(given.items()):
        if value is not None or name == "due_date":
            continue
        if name in _CLEARABLE_TEXT:
            given[name] = ""
        else:
            raise ValueError(f"{name} cannot be null")
    return given


_CLEARABLE_TEXT = frozenset({"site", "notes", "assignee", "team"})


def format_validation_error(error: ValidationError) -> str:
    """One line a person can read: `title: String should have at most 200 characters; ...`."""
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "record"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)
