"""Issue 16 on screen: "Mine", "My team", "Pinned", "Available offline", "Keep offline", the
team field, "No longer assigned to you" and the server search page, in the real window over
the real core, engine and server (in-process on loopback, port 0).

An office device writes work orders through its own store and engine; the phone (user "ana",
team "north") syncs its scope. Assertions read what a person sees (visible, untruncated text)
and what a screen reader gets (the accessibility tree), at a phone's size.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from PySide6.QtGui import QAccessible  # only the tests read the accessibility tree

from app.store.store import Store
from app.sync.engine import SyncConfig, SyncEngine
from server.embedded import EmbeddedServer
from tests.ui.conftest import Device, Office, Open, Runner
from tests.ui.qml_driver import (
    click,
    find,
    screenshot,
    scroll_into_view,
    shown_texts,
    shows,
    texts_shown,
    too_small_targets,
    type_into,
    walk,
)
from tests.ui.test_accessibility import accessible
from tests.ui.test_scope_pages import check_scope_filters

Role = QAccessible.Role


@pytest.fixture
def phone(server: EmbeddedServer, device: Device) -> Device:
    """Ana's phone (team north), its engine and search in the window's services; the test
    starts it."""
    device.sign_in(server, "phone-ana", user="ana", team="north", finder=True)
    return device


def synced_phone(
    run: Runner, open_window: Open, office: Office, phone: Device, rows: int
) -> tuple[Any, Any]:
    """The office's work orders synced, then the phone's window (360x720) once `rows` of
    them have arrived on it."""
    office.sync()
    app_vm, window = open_window(360, 720)
    phone.start()
    run.until(lambda: app_vm.workOrders.total == rows, 20)
    return app_vm, window


def test_filters_show_mine_my_team_and_pinned_each_row_available_offline(
    run: Runner,
    open_window: Open,
    office: Office,
    phone: Device,
    artifacts: Path,
) -> None:
    office.create(title="Replace valve", assignee="ana", team="south")
    office.create(title="Inspect fire doors", assignee="bob", team="north")
    office.create(title="Meter reading", assignee="carl", team="south")  # not in the scope
    app_vm, window = synced_phone(run, open_window, office, phone, 2)
    run.pause(0.2)

    # The filters: touch-sized buttons named by their labels, and every row says it is here.
    check_scope_filters(window)
    assert too_small_targets(window) == []
    assert {"Replace valve", "Inspect fire doors"} <= texts_shown(window)
    assert "Meter reading" not in texts_shown(window)
    marks = [text for text, cut in shown_texts(window) if text == "Available offline" and not cut]
    assert len(marks) == 2

    click(window, find(window, "scopeFilter_mine"))
    run.until(lambda: app_vm.workOrders.total == 1)
    run.pause(0.1)
    assert "Replace valve" in texts_shown(window)
    assert "Inspect fire doors" not in texts_shown(window)
    assert shows(window, "1 work order")

    click(window, find(window, "scopeFilter_team"))
    run.until(lambda: app_vm.workOrders.get(0).get("title") == "Inspect fire doors")
    run.pause(0.1)
    assert "Inspect fire doors" in texts_shown(window)
    assert "Replace valve" not in texts_shown(window)
    screenshot(window, artifacts / "scope-team-filter-360x720.png")

    click(window, find(window, "scopeFilter_pinned"))
    run.until(lambda: app_vm.workOrders.total == 0)
    run.pause(0.1)
    assert shows(window, "No work order is kept offline.")


def test_keep_offline_in_the_editor_pins_on_the_server_and_the_team_is_beside_the_assignee(
    run: Runner,
    open_window: Open,
    office: Office,
    phone: Device,
    server: EmbeddedServer,
    artifacts: Path,
    tmp_path: Path,
) -> None:
    entity_id = office.create(title="Replace valve", assignee="ana", team="north")
    app_vm, window = synced_phone(run, open_window, office, phone, 1)
    click(window, find(window, "workOrderRow_0"))
    run.until(lambda: app_vm.editor.loaded)
    run(app_vm.wait_idle())
    run.pause(0.1)

    team = find(window, "teamField")
    assert accessible(team)[1] == "Team"
    assert team.property("text") == "north"
    assignee = find(window, "assigneeField")
    assert (
        abs(
            team.mapToScene(team.boundingRect().topLeft()).y()
            - assignee.mapToScene(assignee.boundingRect().topLeft()).y()
        )
        < 120
    )
    switch = find(window, "keepOfflineSwitch")
    assert accessible(switch)[1] == "Keep offline"
    assert not switch.property("checked")
    scroll_into_view(find(window, "editorOfflineMark"))
    run.pause(0.1)
    assert shows(window, "Available offline")

    click(window, switch)
    run.until(lambda: app_vm.keepOffline.pinned, 10)
    run(app_vm.wait_idle())
    run.pause(0.1)
    assert find(window, "keepOfflineSwitch").property("checked")
    scroll_into_view(find(window, "editorOfflineMark"))
    run.pause(0.1)
    assert shows(window, "Available offline · Kept offline")
    screenshot(window, artifacts / "scope-keep-offline-360x720.png")
    # The pin is the server's: a reinstalled phone of the same person receives it pinned.
    again = Store(tmp_path / "reinstalled")
    try:
        token = server.add_device("phone-ana-new", user="ana", team="north")
        config = SyncConfig(server_url=server.base_url, reconnect_jitter_s=0)
        fresh = SyncEngine(again, config, token=lambda: token)
        assert run(fresh.run_until_idle(20), 30)
        assert again.cache.get(entity_id)["pinned"] is True
    finally:
        again.close()

    click(window, find(window, "backButton"))
    click(window, find(window, "scopeFilter_pinned"))
    run.until(lambda: app_vm.workOrders.total == 1)
    run.pause(0.1)
    assert shows(window, "Available offline · Kept offline")

    # The team is edited beside the assignee and sent like any field.
    click(window, find(window, "workOrderRow_0"))
    run.until(lambda: app_vm.editor.loaded)
    type_into(window, find(window, "teamField"), "south")
    click(window, find(window, "saveButton"))
    run.until(lambda: app_vm.editor.fields.get("team") == "south" and not app_vm.editor.dirty)
    # Saved is not yet sent: the office reads it once the phone's list says the server has
    # it (the row, the only one, with the new team and its badge "Synced", not "Sending…").
    click(window, find(window, "backButton"))
    run.until(lambda: shows(window, "Team south") and shows(window, "Synced"), 15)
    office.sync()
    assert office.store.cache.get(entity_id)["team"] == "south"


def test_search_page_pages_through_the_server_opens_and_keeps_a_result_offline(
    run: Runner,
    open_window: Open,
    office: Office,
    phone: Device,
    artifacts: Path,
) -> None:
    mine = office.create(title="Pump check own", assignee="ana")
    for i in range(30):
        office.create(title=f"Pump check {i:02d}", assignee="carl", team="south")
    office.sync()
    app_vm, window = open_window(360, 720)
    phone.start()
    run.until(lambda: app_vm.workOrders.total == 1 and app_vm.status.connectivity == "online", 20)

    click(window, find(window, "searchButton"))
    assert app_vm.page == "search"
    assert not shows(window, "needs a connection")
    type_into(window, find(window, "serverSearchField"), "Pump check")
    click(window, find(window, "serverSearchButton"))
    run.until(lambda: len(app_vm.search.results) == 25, 10)
    run.pause(0.2)
    assert shows(window, "25 work orders for “Pump check”, more on the server")
    assert shows(window, "Online only")
    screenshot(window, artifacts / "scope-search-360x720.png")

    click(window, find(window, "searchMoreButton"))
    run.until(lambda: len(app_vm.search.results) == 31, 10)
    run.pause(0.2)
    scroll_into_view(find(window, "searchSummary"))
    run.pause(0.1)
    assert shows(window, "31 work orders for “Pump check”")
    assert not find(window, "searchMoreButton").isVisible()

    rows = {r["title"]: r for r in app_vm.search.results}
    assert rows["Pump check own"]["offlineText"] == "Available offline"
    # An online-only result opens on this page, its fields named as the editor names them
    # (the labels come from Python: `ui.wording.FIELD_LABELS`).
    app_vm.search.openResult(rows["Pump check 08"]["entityId"])
    run.pause(0.1)
    for label in ("Status", "Site", "Assignee", "Team", "Notes"):
        assert shows(window, label), label
    app_vm.search.closeResult()
    run.pause(0.1)
    # Keep one offline from its result: it arrives on this device and then opens in the editor.
    other = rows["Pump check 07"]["entityId"]
    index = [r["entityId"] for r in app_vm.search.results].index(other)
    result = find(window, f"searchResult_{index}")
    assert accessible(result) == (Role.ListItem, "Pump check 07, Online only")
    keep = next(c for c in walk(result) if c.objectName() == "keepResultOfflineButton")
    assert accessible(keep)[1] == "Keep offline: Pump check 07"
    click(window, keep)
    run.until(lambda: _result(app_vm, other)["held"], 15)
    run.pause(0.1)
    result = find(window, f"searchResult_{index}")
    assert accessible(result) == (Role.ListItem, "Pump check 07, Available offline")
    opener = next(c for c in walk(result) if c.objectName() == "openResultButton")
    click(window, opener)
    run.until(lambda: app_vm.page == "editor" and app_vm.editor.loaded)
    run.pause(0.1)
    assert find(window, "titleField").property("text") == "Pump check 07"
    assert app_vm.keepOffline.pinned

    # Not on this device is not "does not exist": the list offers the server's search.
    click(window, find(window, "backButton"))
    type_into(window, find(window, "searchField"), "Pump check 2")
    run.until(lambda: app_vm.workOrders.total == 0)
    run.pause(0.1)
    assert shows(window, "No work order matches.")
    click(window, find(window, "searchServerButton"))
    run.until(lambda: app_vm.page == "search" and len(app_vm.search.results) == 10, 10)
    run.pause(0.2)
    assert shows(window, "10 work orders for “Pump check 2”")
    assert mine not in {r["entityId"] for r in app_vm.search.results}


def test_a_work_order_no_longer_assigned_with_an_unsent_edit_says_so_and_leaves_when_sent(
    run: Runner,
    open_window: Open,
    office: Office,
    phone: Device,
    store: Store,
    server: EmbeddedServer,
    artifacts: Path,
) -> None:
    entity_id = office.create(title="Replace valve", assignee="ana", notes="")
    app_vm, window = synced_phone(run, open_window, office, phone, 1)
    phone.stop()

    # The worker writes a note offline; meanwhile the office writes another note and hands
    # the job to someone else. The note conflicts: it is held, and the work order stays.
    store.record_edit("update", entity_id, {"notes": "Gasket replaced"})
    office.update(entity_id, notes="Valve ordered, do not open", assignee="carl")
    office.sync()
    phone.connect(server.base_url)
    phone.start()
    run.until(lambda: app_vm.workOrders.get(0).get("scopeText") == "No longer assigned to you", 20)
    run(app_vm.wait_idle())
    run.pause(0.2)
    row = find(window, "workOrderRow_0")
    assert accessible(row)[1] == "Replace valve, Conflict, No longer assigned to you"
    assert shows(window, "No longer assigned to you — ")

    click(window, row)
    run.until(lambda: app_vm.editor.loaded and app_vm.keepOffline.outOfScope)
    run(app_vm.wait_idle())
    run.pause(0.1)
    assert shows(window, "No longer assigned to you")
    assert shows(window, "resolve the conflict, then it leaves this device")
    assert find(window, "resolveConflictButton").isVisible()
    screenshot(window, artifacts / "scope-no-longer-assigned-360x720.png")

    # Resolved by keeping the worker's note: delivered, then the work order leaves the device.
    click(window, find(window, "resolveConflictButton"))
    run.until(lambda: app_vm.page == "conflict" and app_vm.conflicts.hasCurrent)
    run(app_vm.conflicts.wait_idle())
    click(window, find(window, "mine_notes"))
    click(window, find(window, "resolveButton"))
    run.until(lambda: store.cache.get(entity_id) is None, 20)
    office.sync()
    assert office.store.cache.get(entity_id)["notes"] == "Gasket replaced"


def _result(app_vm: Any, entity_id: str) -> dict[str, Any]:
    return next(r for r in app_vm.search.results if r["entityId"] == entity_id)
