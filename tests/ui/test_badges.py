"""`badge_for`, directly: every branch, the order of precedence, the words a row shows."""

from __future__ import annotations

import pytest

from app.states import BadgeKind
from app.store.deadletters import EntityJobState
from ui.viewmodels.badges import BADGES, Badge, badge_for

NOW = 1_700_000_000.0


def test_no_outstanding_jobs_is_synced() -> None:
    assert badge_for(None, NOW) == Badge(
        BadgeKind.SYNCED, "Synced", "The server has every change to this work order."
    )
    # A state with nothing outstanding in it (every count zero) reads the same.
    assert badge_for(EntityJobState(), NOW).kind == BadgeKind.SYNCED


def test_a_failed_change_names_its_reason_and_the_panel() -> None:
    badge = badge_for(EntityJobState(dead=1, last_error="the server rejected the values"), NOW)
    assert badge.kind == BadgeKind.FAILED
    assert badge.text == "Failed"
    assert badge.detail == (
        "A change could not be delivered: the server rejected the values. "
        "Open the failed changes panel to retry or discard it."
    )


def test_a_failed_change_without_a_reason_says_none_was_recorded() -> None:
    assert "no reason recorded" in badge_for(EntityJobState(dead=1), NOW).detail


@pytest.mark.parametrize(
    ("pending", "leased", "text", "held"),
    [
        (1, 0, "Failed (+1 held)", " 1 later edit waits behind it."),
        (2, 1, "Failed (+3 held)", " 3 later edits wait behind it."),
    ],
)
def test_later_edits_held_behind_a_failure_are_counted(
    pending: int, leased: int, text: str, held: str
) -> None:
    badge = badge_for(EntityJobState(dead=1, pending=pending, leased=leased), NOW)
    assert badge.text == text
    assert badge.detail.endswith(held)


def test_a_conflict_asks_to_choose_and_counts_what_waits() -> None:
    alone = badge_for(EntityJobState(conflict=1), NOW)
    assert (alone.kind, alone.text) == (BadgeKind.CONFLICT, "Conflict")
    assert alone.detail == (
        "Someone changed this work order on the server too. Choose what to keep."
    )
    held = badge_for(EntityJobState(conflict=1, pending=2), NOW)
    assert held.text == "Conflict (+2 held)"
    assert held.detail.endswith(" 2 later edits wait behind it.")


def test_a_conflict_sent_for_review_waits_for_the_admin() -> None:
    badge = badge_for(EntityJobState(conflict=1, in_review=True, pending=1), NOW)
    assert badge == Badge(
        BadgeKind.REVIEW,
        "Waiting for review",
        "An admin will decide; you can keep working. 1 later edit waits behind it.",
    )


def test_a_retry_counts_down_to_its_next_attempt() -> None:
    state = EntityJobState(retrying=1, pending=1, next_attempt_at=NOW + 90, last_error="timeout")
    badge = badge_for(state, NOW)
    assert badge == Badge(BadgeKind.RETRYING, "Retrying in 1 min", "Last try failed: timeout")
    assert badge_for(state, NOW + 87).text == "Retrying in 3 s"


def test_a_retry_past_its_time_waits_and_never_says_now() -> None:
    state = EntityJobState(retrying=1, pending=1, next_attempt_at=NOW - 5)
    badge = badge_for(state, NOW)
    assert badge.text == "Waiting to retry"
    assert badge.detail == "Last try failed: unknown error"
    # Exactly due is due too.
    assert badge_for(EntityJobState(retrying=1, next_attempt_at=NOW), NOW).text == (
        "Waiting to retry"
    )


def test_a_retry_without_a_time_is_soon() -> None:
    assert badge_for(EntityJobState(retrying=1), NOW).text == "Retrying soon"


def test_a_leased_job_is_being_sent() -> None:
    assert badge_for(EntityJobState(leased=1, pending=1), NOW) == Badge(
        BadgeKind.SENDING, "Sending…", "Being sent to the server now."
    )


def test_pending_counts_its_edits_and_says_when_they_go() -> None:
    one = badge_for(EntityJobState(pending=1), NOW)
    assert (one.kind, one.text) == (BadgeKind.PENDING, "Pending (1 edit)")
    assert one.detail == "Saved on this device; will be sent when the server is reachable."
    two = badge_for(EntityJobState(pending=2), NOW, online=True)
    assert two.text == "Pending (2 edits)"
    assert two.detail == "Saved on this device; being sent to the server."


def test_online_changes_only_the_pending_words() -> None:
    for state in (
        EntityJobState(dead=1),
        EntityJobState(conflict=1),
        EntityJobState(retrying=1, next_attempt_at=NOW + 10),
        EntityJobState(leased=1),
    ):
        assert badge_for(state, NOW, online=True) == badge_for(state, NOW, online=False)


# Every flag at once, then one less each time: the most worrying one shows.
_PRECEDENCE = [
    (
        EntityJobState(dead=1, in_review=True, conflict=1, retrying=1, leased=1, pending=1),
        BadgeKind.FAILED,
    ),
    (
        EntityJobState(in_review=True, conflict=1, retrying=1, leased=1, pending=1),
        BadgeKind.REVIEW,
    ),
    (EntityJobState(conflict=1, retrying=1, leased=1, pending=1), BadgeKind.CONFLICT),
    (EntityJobState(retrying=1, leased=1, pending=1), BadgeKind.RETRYING),
    (EntityJobState(leased=1, pending=1), BadgeKind.SENDING),
    (EntityJobState(pending=1), BadgeKind.PENDING),
]


@pytest.mark.parametrize(("state", "kind"), _PRECEDENCE)
def test_the_most_worrying_state_wins(state: EntityJobState, kind: BadgeKind) -> None:
    assert badge_for(state, NOW).kind == kind


def test_badge_kinds_are_listed_most_worrying_first() -> None:
    # A review is a conflict an admin holds: the order is the person's, not the branches'.
    assert BADGES == (
        "failed",
        "conflict",
        "review",
        "retrying",
        "sending",
        "pending",
        "synced",
    )
    assert {kind for _, kind in _PRECEDENCE} | {BadgeKind.SYNCED} == set(BADGES)
