"""The failed-changes form: a dead job's payload as the editor's fields, the fields the server
refused with its reason, and the edited values back as a payload checked by the contract.

The server answers a refused field with pydantic's detail list (``server.records.mutations.
validation_detail``: ``[{"loc": ["title"], "msg": …}]``), which delivery stores after the
reason (``app.sync.delivery._reason``); older or hand-made reasons read ``title: why``.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from app.mutations import validate_mutation
from app.records import ValidationError
from ui.viewmodels.form import FIELDS, field_errors

__all__ = ["form_fields", "form_payload", "refused_fields"]

_ANY_ID = "00000000-0000-0000-0000-000000000000"


def refused_fields(error: str | None) -> dict[str, str]:
    """The fields a stored refusal names, each with the server's words (empty: none named)."""
    text = error or ""
    refused: dict[str, str] = {}
    start = text.find("[{")
    if start >= 0:
        try:
            items = ast.literal_eval(text[start:])
        except (ValueError, SyntaxError):
            items = []
        for item in items if isinstance(items, list) else []:
            loc = item.get("loc", []) if isinstance(item, dict) else []
            name = next((str(p) for p in reversed(loc) if str(p) in FIELDS), None)
            if name is not None:
                message = str(item.get("msg", "")).removeprefix("Value error, ")
                refused.setdefault(name, message[:1].upper() + message[1:])
    for name in FIELDS:
        match = re.search(rf"\b{name}: ([^;\]]+)", text)
        if match and name not in refused:
            message = match.group(1).strip()
            refused[name] = message[:1].upper() + message[1:]
    return refused


def form_fields(payload: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The fields a payload's form shows (an update: those it sets; a delete: none) and
    their values as the editor's strings."""
    op = payload.get("op")
    given = payload.get("fields") or {}
    names = [] if op == "delete" else [n for n in FIELDS if op == "create" or n in given]
    values = {n: "" if given.get(n) is None else str(given[n]) for n in names}
    return names, values


def form_payload(op: str, values: dict[str, str]) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The edited values as a payload checked by the contract, or None and the errors by
    field (``record`` when no field is to blame)."""
    fields: dict[str, Any] = {
        name: None if name == "due_date" and value == "" else value
        for name, value in values.items()
    }
    try:
        checked = validate_mutation(op, None if op == "create" else _ANY_ID, fields)
    except ValidationError as exc:
        return None, field_errors(exc)
    except ValueError as exc:
        message = str(exc)
        return None, {"record": message[:1].upper() + message[1:]}
    return {"op": checked.op, "fields": checked.fields}, {}
