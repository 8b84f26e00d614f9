"""The shared work-order schema: the rules the editor, the CLI and the server all apply."""

from __future__ import annotations

import pytest

from app.records import (
    EDITABLE_FIELDS,
    Mutation,
    ValidationError,
    format_validation_error,
    validate_create,
    validate_patch,
    work_order_defaults,
)


def test_create_fills_defaults_and_keeps_tabs_and_line_breaks() -> None:
    record = validate_create({"title": "Pump\tcheck", "notes": "line 1\r\nline 2"})
    assert record == {
        "title": "Pump\tcheck",
        "site": "",
        "status": "open",
        "priority": "normal",
        "notes": "line 1\r\nline 2",
        "assignee": "",
        "team": "",
        "due_date": None,
        "deleted": False,
    }


def test_the_defaults_are_what_a_create_fills_in_for_every_field_but_the_title() -> None:
    defaults = work_order_defaults()
    assert set(defaults) == set(EDITABLE_FIELDS) - {"title"}
    assert validate_create({"title": "Pump check"}) == {"title": "Pump check", **defaults}
    defaults["status"] = "done"
    assert work_order_defaults()["status"] == "open"


@pytest.mark.parametrize("text", ["a\x00b", "bell\x07", "esc\x1b[31m", "del\x7f"])
@pytest.mark.parametrize("field", ["title", "site", "notes", "assignee"])
def test_control_characters_are_refused_with_a_readable_reason(field: str, text: str) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_create({"title": "ok", field: text})
    assert format_validation_error(caught.value) == (
        f"{field}: Value error, must not contain control characters"
    )


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"title": ""}, "title: String should have at least 1 character"),
        ({"title": "   "}, "title: Value error, title must not be blank"),
        ({"title": "x" * 201}, "title: String should have at most 200 characters"),
        ({"title": "x", "notes": "n" * 10_001}, "notes: String should have at most 10000"),
        ({"title": "x", "status": "closed"}, "status: Input should be"),
        ({"title": "x", "due_date": "2026-13-01"}, "due_date:"),
        ({"title": "x", "colour": "red"}, "colour: Extra inputs are not permitted"),
    ],
)
def test_invalid_records_name_the_field(fields: dict[str, object], reason: str) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_create(fields)
    assert format_validation_error(caught.value).startswith(reason)


def test_patch_keeps_only_given_fields_and_clears_text_with_null() -> None:
    assert validate_patch({"notes": None, "site": "B"}) == {"notes": "", "site": "B"}
    assert validate_patch({"due_date": None}) == {"due_date": None}
    with pytest.raises(ValueError, match="status cannot be null"):
        validate_patch({"status": None})


def test_mutation_needs_a_uuid_and_a_positive_base_version() -> None:
    with pytest.raises(ValidationError, match="entity_id must be a UUID"):
        Mutation.model_validate({"entity_id": "42", "op": "create"})
    with pytest.raises(ValidationError):
        Mutation.model_validate(
            {"entity_id": "0b7c1b0e-2f0a-4d8e-9a53-7c1d2f3e4a5b", "op": "update", "base_version": 0}
        )
