"""The editor's form as text: its fields, the blank form, a record as a form, and the
changes it holds checked by the mutation contract (`app.mutations`), as the store and the
server check them. Pure functions, shared by the editor and the failed-changes form."""

from __future__ import annotations

from typing import Any

from app.mutations import validate_mutation
from app.records import ValidationError

__all__ = [
    "BLANK",
    "FIELDS",
    "as_form",
    "changed_fields",
    "check_form",
    "field_errors",
    "follow_server",
]

FIELDS = ("title", "site", "status", "priority", "assignee", "team", "due_date", "notes")
BLANK = {
    "title": "",
    "site": "",
    "status": "open",
    "priority": "normal",
    "assignee": "",
    "team": "",
    "due_date": "",
    "notes": "",
}


def as_form(record: dict[str, Any]) -> dict[str, str]:
    return {name: "" if record.get(name) is None else str(record[name]) for name in FIELDS}


def field_errors(error: ValidationError) -> dict[str, str]:
    errors: dict[str, str] = {}
    for item in error.errors():
        name = str(item["loc"][0]) if item["loc"] else "record"
        message = str(item["msg"]).removeprefix("Value error, ")
        errors.setdefault(name, message[0].upper() + message[1:] if message else message)
    return errors


def changed_fields(
    entity_id: str, form: dict[str, str], original: dict[str, str]
) -> dict[str, Any]:
    """What a save sends: every field of a new work order (``entity_id`` ''), else the
    fields that differ from ``original``; an empty due date is no date."""
    changed: dict[str, Any] = {}
    for name in FIELDS:
        if not entity_id or form[name] != original[name]:
            value: Any = form[name]
            if name == "due_date" and value == "":
                value = None
            changed[name] = value
    return changed


def check_form(
    entity_id: str, form: dict[str, str], original: dict[str, str]
) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The checked fields to save (None: not valid) and the errors by field."""
    fields = changed_fields(entity_id, form, original)
    op = "update" if entity_id else "create"
    if op == "update" and not fields:
        return {}, {}  # "Nothing changed." at save, not an error while typing
    try:
        clean = validate_mutation(op, entity_id or None, fields).fields
    except ValidationError as exc:
        return None, field_errors(exc)
    except ValueError as exc:
        return None, {"record": str(exc)}
    return clean, {}


def follow_server(
    original: dict[str, str], form: dict[str, str], fresh: dict[str, str]
) -> tuple[dict[str, str], dict[str, str]] | None:
    """The work order changed on the server while the person types: the new (original,
    form), the fields they did not touch taking ``fresh``'s values, or None when a field
    they changed moved too (the save then meets it as a conflict, both values shown)."""
    typed = {name: value for name, value in form.items() if value != original[name]}
    if any(fresh[name] != original[name] for name in typed):
        return None
    return fresh, {**fresh, **typed}
