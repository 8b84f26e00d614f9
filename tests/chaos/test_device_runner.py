"""How a restarted chaos device finds where it stopped: by its job rows, not by its log alone."""

from __future__ import annotations

from tests.chaos.device_runner import resume_index


def resume(log: list[str], jobs: int) -> tuple[int, list[str]]:
    appended: list[str] = []
    index = resume_index([line.split(" ") for line in log], jobs, appended.append)
    return index, appended


def test_an_edit_killed_after_its_commit_is_counted_made() -> None:
    log = ["begin 0 0", "done 0 1", "begin 1 1"]
    assert resume(log, jobs=2) == (2, ["done 1 recovered"])


def test_an_edit_killed_before_its_commit_is_made_again() -> None:
    log = ["begin 0 0", "done 0 1", "begin 1 1"]
    assert resume(log, jobs=1) == (1, [])


def test_setup_jobs_that_are_not_the_plans_do_not_hide_a_made_edit() -> None:
    # Three creates of the shared records come before the plan's edits (the device that makes
    # them): an edit whose row is committed must not be made a second time.
    log = ["begin 0 3", "done 0 4", "begin 1 4"]
    assert resume(log, jobs=5) == (2, ["done 1 recovered"])
    assert resume(log, jobs=4) == (1, [])


def test_a_rejected_edit_is_not_made_again() -> None:
    log = ["begin 0 0", "rejected 0 the record is deleted", "begin 1 0", "done 1 1"]
    assert resume(log, jobs=1) == (2, [])
