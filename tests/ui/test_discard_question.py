"""The failed-changes page's "Discard this change?" says what discarding takes along
(issue 20): a create also discards the work order's photos; other changes only themselves."""

from __future__ import annotations

from pathlib import Path

from app.attachments import Attachments
from app.store.store import Store
from tests.attachments.conftest import photo
from tests.ui.conftest import Open, Runner, make_dead
from tests.ui.qml_driver import click, find, shows
from tests.ui.test_pages import settle
from ui.wording import discard_question


def test_discarding_a_create_says_its_photos_go_with_it(
    run: Runner, open_window: Open, store: Store, tmp_path: Path
) -> None:
    job_id = make_dead(store, title="Broken pump")
    (entity,) = [
        row[0] for row in store.read("SELECT entity_key FROM jobs WHERE id = ?", (job_id,))
    ]
    Attachments(store).attach(entity, photo(tmp_path))
    app_vm, window = open_window(1280, 800)
    app_vm.open("dead")
    settle(run, app_vm)
    app_vm.deadLetters.select(job_id)
    settle(run, app_vm)
    click(window, find(window, "discardButton"))
    run.until(lambda: find(window, "confirmDiscard").isVisible())
    assert shows(window, "Discard this change?")
    assert shows(window, "its photos are discarded with it")
    click(window, find(window, "confirmDiscardButton"))
    run.until(lambda: app_vm.deadLetters.count == 0)
    assert Attachments(store).list_for(entity) == [], "the photo went with its work order"


def test_other_changes_are_asked_about_alone() -> None:
    words = discard_question("update")
    assert words.startswith("Discard this change?")
    assert "photo" not in words
    assert "photos" in discard_question("create")
