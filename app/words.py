"""A work order's words, the same on the phone's screens and in the office console: field
labels, statuses and priorities, and a value as two sides compare it.

The one home of these words: `ui.wording` gives them to the view-models (QML reads them from
there), `server.console` to its pages and its change history.
"""

from __future__ import annotations

from typing import Any

from app.records import EDITABLE_FIELDS

__all__ = ["FIELD_LABELS", "PRIORITY_WORDS", "STATUS_WORDS", "field_label", "value_in_words"]


def field_label(name: str) -> str:
    """A work order's field as people read it: "due_date" is "Due date"."""
    return name.replace("_", " ").capitalize()


#: Every editable field's label (and the tombstone's, "Deleted").
FIELD_LABELS: dict[str, str] = {name: field_label(name) for name in EDITABLE_FIELDS}
#: A work order's status in words, in the order a choice lists them.
STATUS_WORDS: dict[str, str] = {
    "open": "Open",
    "in_progress": "In progress",
    "done": "Done",
    "cancelled": "Cancelled",
}
PRIORITY_WORDS: dict[str, str] = {"low": "Low", "normal": "Normal", "high": "High"}


def value_in_words(value: Any) -> str:
    """A field's value where two sides are compared: "(empty)", yes/no, or the text."""
    if value is None or value == "":
        return "(empty)"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
