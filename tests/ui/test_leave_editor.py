"""Leaving the editor never drops typing without asking.

Back, another row, New, the menu: each way out of a work order with unsaved changes asks
"Discard your changes to this work order?" first. Keep editing keeps every typed character;
Discard goes where the person was going. Assertions read the visible text of a real window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.store.store import Store
from tests.ui.app_driver import open_row, settle, tap
from tests.ui.conftest import Open, Runner, add_orders
from tests.ui.qml_driver import check_phone_layout, find, screenshot, shows, type_into
from ui.viewmodels.app import AppViewModel

QUESTION = "Discard your changes to this work order?"


def typing_in_the_first(
    run: Runner, open_window: Open, store: Store, size: tuple[int, int], field: str, text: str
) -> tuple[AppViewModel, Any]:
    """A window of `size` with three work orders, the first open and `text` typed in `field`."""
    add_orders(store, 3)
    app_vm, window = open_window(*size)
    settle(run, app_vm)
    open_row(run, app_vm, window, 0)
    type_into(window, find(window, field), text)
    return app_vm, window


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

    tap(run, app_vm, window, "backButton")
    assert app_vm.page == "editor"
    assert shows(window, QUESTION)
    assert shows(window, "They are not saved yet.")
    check_phone_layout(window)
    screenshot(window, artifacts / "leave-editor-360x720-light.png")

    tap(run, app_vm, window, "keepEditingWorkOrderButton")
    assert not shows(window, QUESTION)
    assert app_vm.page == "editor"
    assert title.property("text") == "Pump check 00000: gasket replaced"

    # Discard: back to the list, and the work order reads as it was saved.
    tap(run, app_vm, window, "backButton")
    tap(run, app_vm, window, "discardWorkOrderEditsButton")
    assert app_vm.page == "list"
    assert not shows(window, QUESTION)
    open_row(run, app_vm, window, 0)
    assert find(window, "titleField").property("text") == "Pump check 00000"


def test_another_row_or_new_on_a_wide_window_asks_first(
    run: Runner, open_window: Open, store: Store
) -> None:
    app_vm, window = typing_in_the_first(
        run, open_window, store, (1280, 800), "notesField", "Valve seized, ordered a new one"
    )

    tap(run, app_vm, window, "workOrderRow_1")
    assert shows(window, QUESTION)
    assert find(window, "titleField").property("text") == "Pump check 00000"
    tap(run, app_vm, window, "newButton")  # asking again replaces where it would go
    tap(run, app_vm, window, "keepEditingWorkOrderButton")
    assert find(window, "notesField").property("text") == "Valve seized, ordered a new one"

    # The same row tapped again keeps the typing, without a question.
    tap(run, app_vm, window, "workOrderRow_0")
    assert not shows(window, QUESTION)
    assert find(window, "notesField").property("text") == "Valve seized, ordered a new one"

    tap(run, app_vm, window, "workOrderRow_1")
    tap(run, app_vm, window, "discardWorkOrderEditsButton")
    run.until(lambda: find(window, "titleField").property("text") == "Pump check 00001")
    assert not shows(window, QUESTION)


def test_saved_typing_leaves_without_a_question(
    run: Runner, open_window: Open, store: Store
) -> None:
    app_vm, window = typing_in_the_first(
        run, open_window, store, (360, 720), "siteField", "North yard, gate 2"
    )
    tap(run, app_vm, window, "saveButton")
    run.until(lambda: not app_vm.editor.dirty)
    tap(run, app_vm, window, "backButton")
    assert app_vm.page == "list"
    assert not shows(window, QUESTION)
