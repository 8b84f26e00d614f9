"""`check_json_types` answers as it did when it always encoded with the standard library:
the same documents pass, and the same errors (type, place, message, input) come back."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from app.records import WorkOrder, WorkOrderPatch
from server.wire import check_json_types

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
