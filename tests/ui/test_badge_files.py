"""The row's badge speaks for the whole work order: "Synced" only with its files (issue 24)."""

from __future__ import annotations

from app.states import BadgeKind
from app.store.deadletters import EntityJobState
from ui.viewmodels.badges import badge_for, with_files


def test_a_synced_work_order_with_a_failed_file_says_which_part_synced() -> None:
    badge = with_files(badge_for(None, 0.0), waiting=1, failed=1)
    assert badge.text == "Details synced"
    assert "1 file did not upload" in badge.detail


def test_files_still_uploading_are_not_synced_either() -> None:
    badge = with_files(badge_for(None, 0.0), waiting=2, failed=0)
    assert badge.text == "Details synced"
    assert "still uploading" in badge.detail


def test_nothing_waiting_is_plainly_synced() -> None:
    assert with_files(badge_for(None, 0.0), waiting=0, failed=0).text == "Synced"


def test_a_badge_that_is_not_synced_is_left_as_it_is() -> None:
    state = EntityJobState(pending=1)
    pending = badge_for(state, 0.0)
    assert pending.kind is BadgeKind.PENDING
    assert with_files(pending, waiting=1, failed=1) == pending
