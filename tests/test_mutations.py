"""The mutation contract: one set of envelope rules, one wording, for device and server."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.mutations import (
    DELETE_TAKES_NO_FIELDS,
    NEEDS_ENTITY_ID,
    UNKNOWN_OP,
    UPDATE_NEEDS_FIELDS,
    CheckedMutation,
    intended_fields,
    validate_mutation,
)
from app.records import ValidationError
from app.store.errors import InvalidEditError
from app.store.store import Store
from server.records.mutations import InvalidMutation
from server.records.mutations import validate_mutation as server_validate
from ui.viewmodels.deadletters import validate_payload

ENTITY = "0F8FAD5B-D9CB-469F-A165-70867728950E"


def test_create_is_normalized_and_keeps_its_canonical_id() -> None:
    checked = validate_mutation("create", ENTITY, {"title": "Pump"})
    assert checked.entity_id == ENTITY.lower()
    assert checked.fields["title"] == "Pump"
    assert checked.fields["status"] == "open"  # defaults filled in
    assert validate_mutation("create", None, {"title": "Pump"}).entity_id is None


def test_update_and_delete_carry_what_is_sent() -> None:
    assert validate_mutation("update", ENTITY, {"site": None}).fields == {"site": ""}
    assert validate_mutation("delete", ENTITY, {}) == CheckedMutation("delete", ENTITY.lower(), {})
    # {"deleted": true} says the same as no fields: tolerated, sent as none.
    assert validate_mutation("delete", ENTITY, {"deleted": True}).fields == {}


@pytest.mark.parametrize(
    ("op", "entity_id", "fields", "words"),
    [
        ("update", ENTITY, {}, UPDATE_NEEDS_FIELDS),
        ("delete", ENTITY, {"title": "x"}, DELETE_TAKES_NO_FIELDS),
        ("move", ENTITY, {}, UNKNOWN_OP.format(op="move")),
        ("update", None, {"title": "x"}, NEEDS_ENTITY_ID.format(op="update")),
        ("update", "not-a-uuid", {"title": "x"}, "'not-a-uuid' is not a work-order id (a UUID)"),
    ],
)
def test_envelope_errors_use_the_contract_words(
    op: str, entity_id: str | None, fields: dict[str, Any], words: str
) -> None:
    with pytest.raises(ValueError, match=".") as caught:
        validate_mutation(op, entity_id, fields)
    assert not isinstance(caught.value, ValidationError)
    assert str(caught.value) == words


def test_field_errors_stay_pydantic_errors_for_the_servers_detail_list() -> None:
    with pytest.raises(ValidationError):
        validate_mutation("update", ENTITY, {"priority": "urgent"})


def test_intended_fields_of_a_queued_payload() -> None:
    assert intended_fields({"op": "delete", "fields": {}}) == {"deleted": True}
    assert intended_fields({"op": "update", "fields": {"site": "B"}}) == {"site": "B"}
    assert intended_fields({"op": "create"}) == {}


@pytest.mark.parametrize(
    ("op", "fields", "words"),
    [
        ("update", {}, UPDATE_NEEDS_FIELDS),
        ("delete", {"title": "x"}, DELETE_TAKES_NO_FIELDS),
    ],
)
def test_store_server_and_dead_letter_form_say_the_same(
    tmp_path: Path, op: str, fields: dict[str, Any], words: str
) -> None:
    """The same broken mutation is refused in the same words by all three checkers."""
    with Store(tmp_path) as store:
        entity = store.record_edit("create", None, {"title": "Pump"}).entity_id
        with pytest.raises(InvalidEditError) as at_store:
            store.record_edit(op, entity, fields)  # type: ignore[arg-type]
    with pytest.raises(InvalidMutation) as at_server:
        server_validate(
            {"entity_id": str(uuid.uuid4()), "op": op, "base_version": 1, "fields": fields}
        )
    with pytest.raises(ValueError, match="(?i)" + words[:6]) as in_form:
        validate_payload(json.dumps({"op": op, "fields": fields}))
    assert words in str(at_store.value)
    assert at_server.value.detail == words
    assert str(in_form.value) == words[:1].upper() + words[1:]  # a sentence on screen
