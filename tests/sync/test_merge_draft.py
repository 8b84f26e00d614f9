"""A draft reopened over a work order that changed on the server: a three-way merge."""

from __future__ import annotations

from app.sync.merge import merge_draft

BASE = {"title": "Replace valve", "site": "North yard", "notes": "", "priority": "normal"}


def test_untouched_fields_follow_the_server_and_typing_stays() -> None:
    typed = {**BASE, "notes": "Gasket replaced"}
    now = {**BASE, "site": "South yard", "priority": "high"}
    merged = merge_draft(BASE, typed, now)
    assert merged.form == {**now, "notes": "Gasket replaced"}
    assert merged.overlapping == {}
    assert set(merged.from_server) == {"site", "priority"}


def test_a_field_both_changed_differently_is_named_with_both_values() -> None:
    typed = {**BASE, "notes": "Mine"}
    now = {**BASE, "notes": "Theirs", "site": "South yard"}
    merged = merge_draft(BASE, typed, now)
    assert merged.form["notes"] == "Mine"  # shown until the person chooses
    assert merged.overlapping == {"notes": "Theirs"}
    assert merged.form["site"] == "South yard"


def test_the_same_change_on_both_sides_is_no_question() -> None:
    typed = {**BASE, "notes": "Same"}
    merged = merge_draft(BASE, typed, {**BASE, "notes": "Same"})
    assert merged.overlapping == {}
    assert merged.form["notes"] == "Same"
    assert merged.from_server == ()


def test_a_new_forms_draft_comes_back_as_typed() -> None:
    blank = dict.fromkeys(BASE, "")
    typed = {**blank, "title": "New pump"}
    assert merge_draft(blank, typed, blank).form == typed
