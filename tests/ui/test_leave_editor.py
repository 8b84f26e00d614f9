"""Leaving the editor never drops typing without asking.

Back, another row, New, the menu: each way out of a work order with unsaved changes asks
"Discard your changes to this work order?" first. Keep editing keeps every typed character;
Discard goes where the person was going. Assertions read the visible text of a real window.
"""

from __future__ import annotations

from pathlib import Path

from app.store.store import Store
from tests.ui.conftest import Open, Runner, add_orders
from tests.ui.qml_driver import check_phone_layout, click, find, screenshot, shows, type_into
from ui.viewmodels.app import AppViewModel

QUESTION = "Discard your changes to this work order?"


def settle(run: Runner, app_vm: AppViewModel) -> None:
    run(app_vm.wait_idle())
    run.pause(0.05)


def open_row(run: Runner, app_vm: AppViewModel, window: object, index: int) -> None:
    click(window, find(window, f"workOrderRow_{index}"))
    settle(run, app_vm)
    run.until(lambda: app_vm.editor.loaded)


def test_back_with_typing_asks_and_keep_editing_keeps_it(
    run: Runner, open_window: Open, store: Store, artifacts: Path
) -> None:
    add_orders(store, 3)
    app_vm, window = open_window(360, 720)
    settle(run, app_vm)
    open_row(run, app_vm, window, 0)
    title = find(window, "titleField")
    assert title.property("text") == "Pump check 00000"
    type_into(window, title, "Pump check 00000: gasket replaced")
    assert not shows(window, QUESTION)

    click(window, find(window, "backButton"))
    settle(run, app_vm)
    assert app_vm.page == "editor"
    assert shows(window, QUESTION)
    assert shows(window, "They are not saved yet.")
    check_phone_layout(window)
    screenshot(window, artifacts / "leave-editor-360x720-light.png")

    click(window, find(window, "keepEditingWorkOrderButton"))
    settle(run, app_vm)
    assert not shows(window, QUESTION)
    assert app_vm.page == "editor"
    assert title.property("text") == "Pump check 00000: gasket replaced"

    # Discard: back to the list, and the work order reads as it was saved.
    click(window, find(window, "backButton"))
    settle(run, app_vm)
    click(window, find(window, "discardWorkOrderEditsButton"))
    settle(run, app_vm)
    assert app_vm.page == "list"
    assert not shows(window, QUESTION)
    open_row(run, app_vm, window, 0)
    assert find(window, "titleField").property("text") == "Pump check 00000"


def test_another_row_or_new_on_a_wide_window_asks_first(
    run: Runner, open_window: Open, store: Store
) -> None:
    add_orders(store, 3)
    app_vm, window = open_window(1280, 800)
    settle(run, app_vm)
    open_row(run, app_vm, window, 0)
    type_into(window, find(window, "notesField"), "Valve seized, ordered a new one")

    click(window, find(window, "workOrderRow_1"))
    settle(run, app_vm)
    assert shows(window, QUESTION)
    assert find(window, "titleField").property("text") == "Pump check 00000"
    click(window, find(window, "newButton"))  # asking again replaces where it would go
    settle(run, app_vm)
    click(window, find(window, "keepEditingWorkOrderButton"))
    settle(run, app_vm)
    assert find(window, "notesField").property("text") == "Valve seized, ordered a new one"

    # The same row tapped again keeps the typing, without a question.
    click(window, find(window, "workOrderRow_0"))
    settle(run, app_vm)
    assert not shows(window, QUESTION)
    assert find(window, "notesField").property("text") == "Valve seized, ordered a new one"

    click(window, find(window, "workOrderRow_1"))
    settle(run, app_vm)
    click(window, find(window, "discardWorkOrderEditsButton"))
    settle(run, app_vm)
    run.until(lambda: find(window, "titleField").property("text") == "Pump check 00001")
    assert not shows(window, QUESTION)


def test_saved_typing_leaves_without_a_question(
    run: Runner, open_window: Open, store: Store
) -> None:
    add_orders(store, 1)
    app_vm, window = open_window(360, 720)
    settle(run, app_vm)
    open_row(run, app_vm, window, 0)
    type_into(window, find(window, "siteField"), "North yard, gate 2")
    click(window, find(window, "saveButton"))
    settle(run, app_vm)
    run.until(lambda: not app_vm.editor.dirty)
    click(window, find(window, "backButton"))
    settle(run, app_vm)
    assert app_vm.page == "list"
    assert not shows(window, QUESTION)
