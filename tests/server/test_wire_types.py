"""The wire's quick paths answer as the plain ones did: `check_json_types` as when it always
encoded with the standard library (the same documents pass, the same errors come back), a
mutation whose fields are parsed once as when they were parsed twice, the request hash as the
standard library's text hashed."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from app import mutations as contract
from app.records import WorkOrder, WorkOrderPatch
from server.db.idempotency import request_hash
from server.records.mutations import (
    InvalidMutation,
    ValidMutation,
    validate_creates,
    validate_mutation,
    validation_detail,
)
from server.wire import Mutation, check_json_types, check_wire_fields, wire_entity_id

_NAMES = st.sampled_from(
    ["title", "site", "notes", "status", "priority", "assignee", "due_date", "deleted", "x"]
)
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),  # lone surrogates included
    st.sampled_from(["open", "high", "2026-12-02", "2026-02-30", ""]),
    st.lists(st.integers(), max_size=2),
)


def _outcome(model: type[BaseModel], check: Any, value: dict[str, Any]) -> Any:
    try:
        check(model, value)
    except ValidationError as error:
        # Without the context (its exception objects compare by identity; the message says
        # it), as text (NaN is not equal to itself).
        return repr(error.errors(include_url=False, include_context=False))
    return None


def _standard(model: type[BaseModel], value: dict[str, Any]) -> None:
    model.model_validate_json(json.dumps(value), strict=True)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_NAMES, _VALUES, max_size=5), st.sampled_from([WorkOrder, WorkOrderPatch]))
def test_the_same_errors_as_with_the_standard_library(
    value: dict[str, Any], model: type[BaseModel]
) -> None:
    assert _outcome(model, check_json_types, value) == _outcome(model, _standard, value)


def _answer(validate: Any, raw: dict[str, Any]) -> Any:
    try:
        return validate(raw)
    except InvalidMutation as error:
        return ("invalid", repr(error.detail))


def _parsing_twice(raw: dict[str, Any]) -> ValidMutation:
    """`validate_mutation` as it was before it parsed the fields once: the wire's strict
    check, then the contract parsing them again on its own."""
    try:
        mutation = Mutation.model_validate(raw)
    except ValidationError as error:
        raise InvalidMutation(validation_detail(error)) from None
    if wire_entity_id(mutation.entity_id) is None:
        issue = {"loc": ["entity_id"], "msg": "Value error, entity_id must be a UUID"}
        raise InvalidMutation([{**issue, "type": "value_error"}])
    if mutation.op == "create":
        if mutation.base_version is not None:
            raise InvalidMutation(contract.BASE_FORBIDDEN_FOR_CREATE)
    elif mutation.base_version is None:
        raise InvalidMutation(contract.BASE_REQUIRED.format(op=mutation.op))
    try:
        check_wire_fields(mutation.op, mutation.fields)
        checked = contract.validate_mutation(mutation.op, mutation.entity_id, mutation.fields)
    except (ValidationError, ValueError) as error:
        raise InvalidMutation(validation_detail(error)) from None
    assert checked.entity_id is not None
    fields = checked.fields if checked.op == "create" else checked.intended()
    return ValidMutation(checked.entity_id, checked.op, mutation.base_version, fields)


_IDS = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda value: str(value).upper()),
    st.uuids().map(lambda value: "{" + str(value) + "}"),  # a UUID, not in the wire's spelling
    st.just("not-a-uuid"),
)


@settings(max_examples=300, deadline=None)
@given(
    _IDS,
    st.sampled_from(["create", "update", "delete"]),
    st.dictionaries(_NAMES, _VALUES, max_size=4),
)
def test_a_mutation_parsed_once_is_what_parsing_it_twice_gave(
    entity_id: str, op: str, fields: dict[str, Any]
) -> None:
    raw = {"entity_id": entity_id, "op": op, "base_version": None if op == "create" else 3,
           "fields": fields}  # fmt: skip
    assert _answer(validate_mutation, raw) == _answer(_parsing_twice, raw)


_CREATE_FIELDS = st.one_of(
    st.dictionaries(_NAMES, _VALUES, max_size=4),
    st.fixed_dictionaries(  # what passes, mostly
        {"title": st.sampled_from(["Pump", "Valve \x7f", "Seal\ttab", "\ud800", ""])},
        optional={
            "notes": st.text(max_size=5),
            "due_date": st.sampled_from(["2026-12-02", 3]),
            "priority": st.sampled_from(["high", "urgent"]),
            "deleted": st.booleans(),
        },
    ),  # fmt: skip
)
_CREATES = st.fixed_dictionaries(
    {
        "entity_id": st.one_of(_IDS, st.integers(), st.none()),
        "op": st.sampled_from(["create", "create", "create", "update", "Create", 1]),
        "fields": _CREATE_FIELDS,
    },
    optional={"base_version": st.sampled_from([None, 1, 0, "1", 1.0]), "extra": st.just(1)},
)
_PUMP = {"title": "Pump", "due_date": "2026-12-02"}


@settings(max_examples=300, deadline=None)
@given(st.lists(_CREATES, max_size=3))
@example([{"entity_id": "0E4A7C3E-1D2B-4C5D-8E9F-0A1B2C3D4E5F", "op": "create", "fields": _PUMP}])
def test_creates_validated_at_once_are_what_validating_each_gives(
    items: list[dict[str, Any]],
) -> None:
    quick = validate_creates(items)
    assert len(quick) == len(items)
    for item, valid in zip(items, quick, strict=True):
        if valid is not None:  # taken at once: exactly what one at a time answers
            assert valid == validate_mutation(item)


def test_creates_are_taken_at_once_unless_one_of_them_fails() -> None:
    def create(title: Any) -> dict[str, Any]:
        return {"entity_id": str(uuid.uuid4()).upper(), "op": "create", "fields": {"title": title}}

    update = {"entity_id": str(uuid.uuid4()), "op": "update", "base_version": 1,
              "fields": {"title": "t"}}  # fmt: skip
    items = [create("Pump"), update, create("Valve")]
    quick = validate_creates(items)
    assert quick[1] is None  # not a create: left to validate_mutation
    assert [quick[0], quick[2]] == [validate_mutation(items[0]), validate_mutation(items[2])]
    assert quick[0] is not None
    assert quick[0].entity_id == items[0]["entity_id"].lower()
    # One create that fails leaves every create to validate_mutation, which says which.
    assert validate_creates([create("Pump"), create(""), create("Valve")]) == [None] * 3
    assert validate_creates([create("Pump"), create(2**64)]) == [None] * 2  # past 64 bits


_PLAIN = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.text(),  # control characters, DEL, past ASCII, lone surrogates
        st.text(alphabet=st.characters(max_codepoint=127)),
        st.sampled_from(["\x7f", "tab\tline\nreturn\r", "é", "\u2028", "\ud800", 2**64]),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(), inner)),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(_PLAIN)
@example({"notes": "DEL \x7f"})
def test_the_quick_request_hash_is_the_standard_librarys(payload: Any) -> None:
    text = json.dumps(["mutation", payload], sort_keys=True, separators=(",", ":"))
    standard = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    assert request_hash("mutation", payload, plain=True) == standard
    assert request_hash("mutation", payload) == standard
