"""Times on screen are local and in words, never ISO strings."""

from __future__ import annotations

import datetime as dt
import re
from typing import get_args

import pytest

from app.records import EDITABLE_FIELDS, Priority, Status
from app.states import Connectivity, Reason
from ui.wording import (
    CONNECTIVITY_WORDS,
    FIELD_LABELS,
    PRIORITY_WORDS,
    STATUS_WORDS,
    iso_when,
    reason_in_words,
    when,
)

# A fixed "now": Tuesday 1 December 2026, 10:30 local time.
NOW = dt.datetime(2026, 12, 1, 10, 30).timestamp()


def local(*args: int) -> float:
    return dt.datetime(*args).timestamp()


@pytest.mark.parametrize(
    ("moment", "words"),
    [
        (local(2026, 12, 1, 9, 45, 26), "09:45 today"),
        (local(2026, 11, 30, 14, 2), "14:02 yesterday"),
        (local(2026, 12, 2, 8, 0), "08:00 tomorrow"),
        (local(2026, 11, 27, 7, 5), "07:05 on Friday"),
        (local(2026, 11, 20, 16, 40), "16:40 on 20 Nov"),
        (local(2025, 3, 4, 12, 0), "12:00 on 4 Mar 2025"),
    ],
)
def test_when_reads_as_local_words(moment: float, words: str) -> None:
    assert when(moment, NOW) == words


def test_the_servers_utc_time_is_shown_in_local_time() -> None:
    utc = dt.datetime(2026, 11, 29, 9, 45, 26, 522000, tzinfo=dt.UTC)
    shown = iso_when("2026-11-29T09:45:26.522Z", NOW)
    assert shown == when(utc.timestamp(), NOW)
    assert not re.search(r"\d{4}-\d{2}-\d{2}|T\d{2}:|Z\b", shown)


def test_a_time_that_is_not_one_is_never_shown_raw() -> None:
    assert iso_when("yesterday-ish", NOW) == "an unknown time"
    assert iso_when(None) == "—"
    assert when(None) == "—"


def test_every_connectivity_state_has_its_status_bar_word() -> None:
    # The words of issue 12, one per state the engine publishes; none shown raw.
    assert {state: CONNECTIVITY_WORDS[state] for state in Connectivity} == {
        Connectivity.ONLINE: "Online",
        Connectivity.DEGRADED: "Online",
        Connectivity.OFFLINE: "Offline",
        Connectivity.UNREACHABLE: "Server unreachable",
        Connectivity.SIGNED_OUT: "Signed out",
        Connectivity.PAUSED: "Paused",
        Connectivity.CONNECTING: "Connecting…",
        Connectivity.STOPPED: "Sync is not running",
    }
    # Looked up by the bridge's plain string, as the status bar does.
    assert CONNECTIVITY_WORDS.get("unreachable") == "Server unreachable"


@pytest.mark.parametrize(
    ("code", "detail", "words"),
    [
        (
            Reason.INVALID,
            "title: required",
            "The server refused the change as invalid. (title: required)",
        ),
        (Reason.NOT_FOUND, None, "The work order no longer exists on the server."),
        (Reason.GAVE_UP, "  ", "Could not reach the server after many tries."),
        (None, None, "No reason was recorded."),
        (Reason.REFUSED, "409 odd", "The change could not be delivered. (409 odd)"),
        ("an_unknown_code", "", "No reason was recorded."),
    ],
)
def test_a_reason_code_is_worded_with_the_recorded_words_after_it(
    code: str | None, detail: str | None, words: str
) -> None:
    assert reason_in_words(code, detail) == words


def test_every_status_priority_and_field_has_its_words() -> None:
    # One table each, covering exactly what the record schema allows.
    assert tuple(STATUS_WORDS) == get_args(Status)
    assert STATUS_WORDS == {
        "open": "Open",
        "in_progress": "In progress",
        "done": "Done",
        "cancelled": "Cancelled",
    }
    assert tuple(PRIORITY_WORDS) == get_args(Priority)
    assert set(FIELD_LABELS) == set(EDITABLE_FIELDS)
    assert (FIELD_LABELS["site"], FIELD_LABELS["due_date"]) == ("Site", "Due date")
