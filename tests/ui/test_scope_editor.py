"""Nothing typed is lost when a work order leaves the device (issue 16), on screen: the phone's
person types in a work order while the office hands it to someone else; the pull keeps it
("No longer assigned to you", in words), Save still sends the text to the real server, and
it leaves the device once the person closes it.

The real window (offscreen, 360x720) over the real core, engine and server on loopback; the
assertions read what a person sees (visible, untruncated text).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.store.store import Store
from server.embedded import EmbeddedServer
from tests.ui.conftest import Device, Office, Open, Runner
from tests.ui.qml_driver import click, find, screenshot, scroll_into_view, shows, type_into

Typing = tuple[Any, Any, str, list[str]]

UNSAVED = "Your changes are not saved yet: save them and they are sent to the server"
SENT = "Nothing of yours waits to be sent: it leaves this device when you close it."


def unsent(store: Store) -> int:
    [(count,)] = store.read("SELECT COUNT(*) FROM jobs WHERE finished_at IS NULL")
    return int(count)


@pytest.fixture
def typing(
    run: Runner, open_window: Open, office: Office, server: EmbeddedServer, device: Device
) -> Typing:
    """(app, window, work order, messages said): the phone shows "Replace valve" in its
    editor with "Gasket replaced" typed in the notes, not saved, when the office reassigns
    it and the phone pulls."""
    entity_id = office.create(title="Replace valve", assignee="ana", notes="")
    office.sync()
    device.sign_in(server, "phone-ana", user="ana", team="north")
    app_vm, window = open_window(360, 720)
    said: list[str] = []
    app_vm.message.connect(said.append)
    device.start()
    run.until(lambda: app_vm.workOrders.total == 1, 20)
    click(window, find(window, "workOrderRow_0"))
    run.until(lambda: app_vm.editor.loaded)
    type_into(window, find(window, "notesField"), "Gasket replaced")
    run.until(lambda: app_vm.editor.dirty)

    office.update(entity_id, assignee="carl")
    office.sync()
    run(device.engine.sync_now(), 30)
    run.until(lambda: app_vm.keepOffline.outOfScope, 20)
    run(app_vm.wait_idle())
    run.pause(0.1)
    return app_vm, window, entity_id, said


def test_typing_in_a_work_order_that_leaves_is_kept_saved_and_sent(
    run: Runner, typing: Typing, office: Office, store: Store, artifacts: Path
) -> None:
    app_vm, window, entity_id, said = typing
    # Said at once, wherever the page is scrolled to, and on the card at the top.
    assert find(window, "toastText").property("text").startswith("No longer assigned to you. ")
    assert shows(window, UNSAVED)
    assert shows(window, "Gasket replaced"), "the typing is still on screen"
    scroll_into_view(find(window, "noLongerAssignedMark"))
    run.pause(0.1)
    assert shows(window, "No longer assigned to you")
    assert find(window, "saveButton").isEnabled()
    screenshot(window, artifacts / "scope-typing-no-longer-assigned-360x720.png")

    click(window, find(window, "saveButton"))
    run.until(lambda: not app_vm.editor.dirty and not app_vm.editor.saving, 10)
    assert not any(text.startswith("Not saved") for text in said), said
    run.until(lambda: unsent(store) == 0 and app_vm.keepOffline.outOfScopeText == SENT, 20)
    run(app_vm.wait_idle())
    scroll_into_view(find(window, "noLongerAssignedText"))
    run.pause(0.1)
    assert shows(window, SENT)
    assert shows(window, "No longer assigned to you")
    assert not shows(window, "conflict"), "the office changed another field: it merged"
    scroll_into_view(find(window, "notesField"))
    run.pause(0.1)
    assert shows(window, "Gasket replaced")
    assert find(window, "assigneeField").property("text") == "carl"
    office.sync()
    on_office = office.store.cache.get(entity_id)
    assert on_office["notes"] == "Gasket replaced", "the text reached the server"
    assert on_office["assignee"] == "carl"

    click(window, find(window, "backButton"))
    run.until(lambda: store.cache.get(entity_id) is None, 10)
    run.until(lambda: app_vm.workOrders.total == 0, 10)
    run.pause(0.1)
    assert not shows(window, "Replace valve"), "closed and sent: it left the device"


def test_undoing_the_typing_of_a_work_order_that_left_lets_it_go_when_closed(
    run: Runner, typing: Typing, office: Office, store: Store
) -> None:
    app_vm, window, entity_id, _ = typing
    assert shows(window, UNSAVED)
    click(window, find(window, "revertButton"))
    run.until(lambda: app_vm.keepOffline.outOfScopeText == SENT, 10)
    scroll_into_view(find(window, "noLongerAssignedText"))
    run.pause(0.1)
    assert shows(window, SENT)
    assert not shows(window, "Gasket replaced")
    assert store.cache.get(entity_id) is not None, "on screen: still here"

    click(window, find(window, "backButton"))
    run.until(lambda: app_vm.workOrders.total == 0, 10)
    assert store.cache.get(entity_id) is None
    office.sync()
    assert office.store.cache.get(entity_id)["notes"] == "", "nothing was sent"


def test_a_save_the_server_cannot_take_after_the_work_order_left_waits_for_the_person(
    run: Runner, typing: Typing, office: Office, device: Device, store: Store, artifacts: Path
) -> None:
    app_vm, window, entity_id, said = typing
    office.store.record_edit("delete", entity_id)  # the office deletes it meanwhile
    office.sync()
    click(window, find(window, "saveButton"))
    run(device.engine.sync_now(), 30)
    run.until(lambda: app_vm.editor.badge == "conflict", 20)
    run(app_vm.wait_idle())
    run.pause(0.1)
    scroll_into_view(find(window, "noLongerAssignedText"))
    run.pause(0.1)
    assert shows(window, "No longer assigned to you")
    assert shows(window, "Your edit conflicts with the server's version: resolve the conflict")
    assert store.cache.get(entity_id) is not None, "kept on the device for the person"

    click(window, find(window, "resolveConflictButton"))
    run.until(lambda: app_vm.page == "conflict" and app_vm.conflicts.hasCurrent, 10)
    run(app_vm.conflicts.wait_idle())
    run.pause(0.1)
    assert shows(window, "This work order was deleted on the server while you edited it.")
    assert shows(window, "Gasket replaced"), "the typed text is there to keep or give up"
    screenshot(window, artifacts / "scope-typing-deleted-conflict-360x720.png")
    assert store.cache.get(entity_id) is not None, "the editor let go; the conflict keeps it"
