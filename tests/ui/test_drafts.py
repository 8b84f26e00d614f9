"""Typing survives the app: written as a draft after each pause, restored when the form opens
again ("Restored your unsaved changes from 14:02", Keep / Discard), merged over a work order
that changed on the server meanwhile, removed with Save or Discard. Assertions read the
visible text of a real window at phone size; "the app again" is a fresh set of view-models
over the same store, as after a kill."""

from __future__ import annotations

import time
from typing import Any

from app.store.cache import apply_server_record
from app.store.db import WriteTransaction
from app.store.drafts import NEW_FORM, read_draft
from app.store.store import Store
from tests.ui.app_driver import open_row, settle, tap
from tests.ui.conftest import Open, Runner, add_orders
from tests.ui.qml_driver import check_phone_layout, click, find, shows, type_into
from ui.viewmodels.drafts import PAUSE_MS, restored_words
from ui.viewmodels.workorders import UNSAVED_DRAFT


def drafted(run: Runner, store: Store, key: str, field: str, text: str) -> None:
    """Until the draft of `key` holds `text` in `field` (written within a second)."""
    started = time.monotonic()

    def written() -> bool:
        draft = read_draft(store, key)
        return draft is not None and draft.fields.get(field) == text

    run.until(written, timeout=1.0)
    assert time.monotonic() - started < 1.0


def change_on_server(store: Store, entity_id: str, **fields: Any) -> None:
    """The pull brought a newer version of the work order with these fields."""
    record = store.cache.get(entity_id)
    assert record is not None
    from app.records import EDITABLE_FIELDS

    version = record["server_version"] + 1
    record = {"id": entity_id, **{k: record.get(k) for k in EDITABLE_FIELDS}, **fields}
    record["version"] = version
    with WriteTransaction(store.db, store.path) as conn:
        apply_server_record(conn, record, time.time())


def test_typing_comes_back_after_the_app_ends_unsaved(
    run: Runner, open_window: Open, store: Store
) -> None:
    (first, *_) = add_orders(store, 2)
    app_vm, window = open_window(360, 720)
    open_row(run, app_vm, window, 0)
    type_into(window, find(window, "notesField"), "Gasket replaced, valve greased")
    drafted(run, store, first, "notes", "Gasket replaced, valve greased")
    assert PAUSE_MS < 300  # a kill 300 ms after the last keystroke finds it
    assert store.stats()["drafts"] == 1
    assert sum(store.stats()["queue_depth"].values()) == 2  # the two imports; nothing sent

    # The app again (the first one gone without saving): the row opens with the typing.
    again, window = open_window(360, 720)
    settle(run, again)
    assert again.page == "list"  # an existing work order's draft waits for it to open
    assert shows(window, UNSAVED_DRAFT)  # its row says which one holds the typing
    assert again.workOrders.get(0)["draftText"] == UNSAVED_DRAFT
    assert again.workOrders.get(1)["draftText"] == ""
    open_row(run, again, window, 0)
    draft = read_draft(store, first)
    assert draft is not None
    notice = restored_words(draft.updated_at)
    assert notice == "Restored your unsaved changes from " + time.strftime(
        "%H:%M", time.localtime(draft.updated_at)
    )
    assert shows(window, notice)
    assert find(window, "notesField").property("text") == "Gasket replaced, valve greased"
    assert again.editor.dirty
    assert again.editor.canSave
    assert find(window, "keepDraftButton").property("text") == "Keep"
    check_phone_layout(window)

    tap(run, again, window, "keepDraftButton")
    assert not shows(window, "Restored your unsaved changes")
    assert find(window, "notesField").property("text") == "Gasket replaced, valve greased"

    # Save makes it an edit and the draft goes with it.
    tap(run, again, window, "saveButton")
    run.until(lambda: not again.editor.dirty)
    assert read_draft(store, first) is None
    assert store.cache.get(first)["notes"] == "Gasket replaced, valve greased"  # type: ignore[index]
    again.back()
    settle(run, again)
    run.until(lambda: not shows(window, UNSAVED_DRAFT))


def test_discard_on_the_restored_notice_drops_the_typing(
    run: Runner, open_window: Open, store: Store
) -> None:
    (first, *_) = add_orders(store, 1)
    app_vm, window = open_window(360, 720)
    open_row(run, app_vm, window, 0)
    type_into(window, find(window, "titleField"), "Pump check: retyped")
    drafted(run, store, first, "title", "Pump check: retyped")

    again, window = open_window(360, 720)
    open_row(run, again, window, 0)
    assert shows(window, "Restored your unsaved changes from")
    tap(run, again, window, "discardDraftButton")
    assert find(window, "titleField").property("text") == "Pump check 00000"
    assert not shows(window, "Restored your unsaved changes")
    run.until(lambda: read_draft(store, first) is None)


def test_undo_changes_removes_the_draft(run: Runner, open_window: Open, store: Store) -> None:
    (first,) = add_orders(store, 1)
    app_vm, window = open_window(360, 720)
    open_row(run, app_vm, window, 0)
    type_into(window, find(window, "siteField"), "Depot 9")
    drafted(run, store, first, "site", "Depot 9")
    tap(run, app_vm, window, "revertButton")
    run.until(lambda: read_draft(store, first) is None)
    run.pause(PAUSE_MS / 1000 + 0.1)  # no pause still running writes it back
    assert read_draft(store, first) is None


def test_a_new_work_orders_typing_opens_the_app_on_it(
    run: Runner, open_window: Open, store: Store
) -> None:
    app_vm, window = open_window(360, 720)
    tap(run, app_vm, window, "newButton")
    type_into(window, find(window, "titleField"), "Leak under sink")
    drafted(run, store, NEW_FORM, "title", "Leak under sink")

    again, window = open_window(360, 720)
    settle(run, again)
    run.until(lambda: again.page == "editor")
    assert again.editor.isNew
    assert find(window, "titleField").property("text") == "Leak under sink"
    assert shows(window, "Restored your unsaved changes from")
    tap(run, again, window, "saveButton")
    run.until(lambda: not again.editor.isNew)
    assert read_draft(store, NEW_FORM) is None
    titles = [row[0] for row in store.read("SELECT title FROM work_orders")]
    assert titles == ["Leak under sink"]


def test_a_draft_over_a_server_change_merges_and_asks_for_the_overlap(
    run: Runner, open_window: Open, store: Store
) -> None:
    (first,) = add_orders(store, 1, notes="Check the seal")
    app_vm, window = open_window(360, 720)
    open_row(run, app_vm, window, 0)
    type_into(window, find(window, "notesField"), "Seal replaced")
    type_into(window, find(window, "titleField"), "Pump check: done")
    drafted(run, store, first, "title", "Pump check: done")

    # Meanwhile the office moved the site and rewrote the notes; the app ended unsaved.
    change_on_server(store, first, site="South yard", notes="Seal on order")
    again, window = open_window(360, 720)
    open_row(run, again, window, 0)
    assert shows(window, "Restored your unsaved changes from")
    assert find(window, "siteField").property("text") == "South yard"  # untouched: the server's
    assert find(window, "titleField").property("text") == "Pump check: done"  # only mine
    assert shows(window, "Changed on the server since, and shown as it is now: Site.")
    assert shows(window, "Changed on the server too, differently: Notes. Choose what to keep.")
    assert shows(
        window, "Notes — yours: \u201cSeal replaced\u201d; on the server: \u201cSeal on order\u201d"
    )
    assert not again.editor.canSave  # neither value is dropped unseen
    check_phone_layout(window)

    buttons = [b for b in _buttons(window) if b.property("text") == "Use the server's"]
    assert len(buttons) == 1
    click(window, buttons[0])
    settle(run, again)
    assert find(window, "notesField").property("text") == "Seal on order"
    assert again.editor.canSave
    tap(run, again, window, "saveButton")
    run.until(lambda: not again.editor.dirty)
    record = store.cache.get(first)
    assert record is not None
    assert (record["title"], record["site"], record["notes"]) == (
        "Pump check: done",
        "South yard",
        "Seal on order",
    )
    (payload,) = [
        row[0] for row in store.read("SELECT payload FROM jobs WHERE finished_at IS NULL")
    ]
    assert "South yard" not in payload  # the save sends only what the person changed


def _buttons(window: Any) -> list[Any]:
    from tests.ui.qml_driver import walk

    return [
        item
        for item in walk(window.contentItem())
        if item.metaObject().className().startswith("FsButton") and item.isVisible()
    ]


def test_back_right_after_save_keeps_the_save_and_asks_nothing(
    run: Runner, open_window: Open, store: Store
) -> None:
    (first,) = add_orders(store, 1)
    app_vm, window = open_window(360, 720)
    open_row(run, app_vm, window, 0)
    type_into(window, find(window, "notesField"), "Saved, then straight back")
    # Save, and Back before the save has finished: the typing is being saved, not dropped.
    app_vm.editor.save()
    assert app_vm.editor.saving
    app_vm.back()
    assert not app_vm.askingToDiscardEdits
    assert app_vm.page == "list"
    settle(run, app_vm)
    assert store.cache.get(first)["notes"] == "Saved, then straight back"  # type: ignore[index]
    assert read_draft(store, first) is None
