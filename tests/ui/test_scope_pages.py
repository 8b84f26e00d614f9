"""The list's scope filters and the "No longer assigned to you" state on screen, over the real
store as a pull leaves it (server records with team and pin, the feed's departures, who the
server said this device is). Assertions read the visible text and the accessibility tree.

The same screens against the real server and engine: tests/ui/test_scope_screens.py.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from PySide6.QtGui import QAccessible  # only the tests read the accessibility tree

from app.store.cache import apply_server_records
from app.store.db import WriteTransaction
from app.store.scope import Identity, apply_departures, write_identity
from app.store.store import Store
from server.embedded import EmbeddedServer
from tests.sync.fake_server import record as server_record
from tests.sync.sync_support import closed_port_url
from tests.ui.conftest import Device, Open, Runner
from tests.ui.qml_driver import (
    click,
    find,
    screenshot,
    shown_texts,
    shows,
    texts_shown,
    too_small_targets,
    type_into,
)
from tests.ui.test_accessibility import accessible

Role = QAccessible.Role


def pulled(store: Store, *records: dict[str, Any]) -> list[str]:
    """Work orders as the pull stores them from the server's feed."""
    full = [
        server_record(str(uuid.uuid4()), updated_at="2026-12-01T08:00:00Z", **fields)
        for fields in records
    ]
    with WriteTransaction(store.db, store.path) as conn:
        apply_server_records(conn, full, store.clock())
    return [r["id"] for r in full]


def left_the_scope(store: Store, entity_id: str) -> None:
    """The feed's `{"id": …, "out_of_scope": true}`, as the pull applies it."""
    with WriteTransaction(store.db, store.path) as conn:
        apply_departures(conn, [entity_id], store.clock())


def check_scope_filters(window: Any) -> None:
    """The four filters are on screen, touch-sized, named by their labels and told apart as
    checked or not (check boxes) by a screen reader."""
    for value, label in (
        ("all", "All"),
        ("mine", "Mine"),
        ("team", "My team"),
        ("pinned", "Pinned"),
    ):
        button = find(window, f"scopeFilter_{value}")
        assert button.isVisible()
        assert button.height() >= 48
        assert accessible(button) == (Role.CheckBox, label)
        assert shows(window, label)


@pytest.fixture
def anas_phone(store: Store) -> list[str]:
    write_identity(store, Identity(device="phone-ana", user="ana", team="north", role="worker"))
    return pulled(
        store,
        {"title": "Replace valve", "assignee": "ana", "team": "south"},
        {"title": "Inspect fire doors", "assignee": "bob", "team": "north"},
        {"title": "Meter reading", "assignee": "carl", "team": "east", "pinned": True},
    )


@pytest.fixture
def with_finder(device: Device) -> None:
    """The real core's Finder, its server out of reach (the discard is the device's own)."""
    device.token = "token"
    device.search_on(closed_port_url())


@pytest.mark.parametrize("size", [(360, 720), (1280, 800)], ids=["360x720", "1280x800"])
def test_mine_my_team_and_pinned_filter_the_list_on_screen(
    run: Runner, open_window: Open, anas_phone: list[str], artifacts: Path, size: Any
) -> None:
    app_vm, window = open_window(*size)
    everything = {"Replace valve", "Inspect fire doors", "Meter reading"}
    assert everything <= texts_shown(window)
    assert shows(window, "3 work orders")
    # Every row says it is on this device; the pinned one says it is kept on purpose.
    marks = [text for text, cut in shown_texts(window) if "Available offline" in text and not cut]
    assert sorted(marks) == [
        "Available offline",
        "Available offline",
        "Available offline · Kept offline",
    ]
    row = find(window, "workOrderRow_0")
    assert "Available offline" in QAccessible.queryAccessibleInterface(row).text(
        QAccessible.Text.Description
    )
    check_scope_filters(window)
    assert too_small_targets(window) == [] or size[0] > 400

    cases = {
        "mine": ({"Replace valve"}, "1 work order assigned to ana"),
        "team": ({"Inspect fire doors"}, "1 work order of team north"),
        "pinned": ({"Meter reading"}, "1 work order kept offline"),
    }
    for value, (shown, count) in cases.items():
        click(window, find(window, f"scopeFilter_{value}"))
        run.until(lambda: app_vm.workOrders.total == 1)
        run(app_vm.wait_idle())
        run.pause(0.1)
        assert texts_shown(window) & everything == shown, value
        assert shows(window, count)
        assert find(window, f"scopeFilter_{value}").property("checked")
        if value == "team":
            theme = f"{size[0]}x{size[1]}"
            screenshot(window, artifacts / f"scope-filter-team-{theme}.png")
    click(window, find(window, "scopeFilter_all"))
    run.until(lambda: app_vm.workOrders.total == 3)


def test_before_the_server_says_who_you_are_mine_says_so(
    run: Runner, open_window: Open, store: Store
) -> None:
    pulled(store, {"title": "Replace valve", "assignee": "ana"})
    app_vm, window = open_window()
    click(window, find(window, "scopeFilter_mine"))
    run.until(lambda: app_vm.workOrders.total == 0 and not app_vm.workOrders.loading)
    run.pause(0.1)
    assert shows(window, "This device does not know yet who you are")


def test_no_longer_assigned_with_an_unsent_edit_says_what_happens_and_can_be_discarded(
    run: Runner,
    open_window: Open,
    store: Store,
    anas_phone: list[str],
    artifacts: Path,
    with_finder: None,
) -> None:
    valve = anas_phone[0]
    store.record_edit("update", valve, {"notes": "Gasket replaced"})
    left_the_scope(store, valve)
    # One with nothing unsent just goes.
    left_the_scope(store, anas_phone[1])
    app_vm, window = open_window(360, 720)
    run.until(lambda: app_vm.workOrders.total == 2)
    run.pause(0.1)
    assert "Inspect fire doors" not in texts_shown(window)

    row = find(window, f"workOrderRow_{app_vm.workOrders.row_of(valve)}")
    expected = "Replace valve, Pending (1 edit), No longer assigned to you"
    assert accessible(row) == (Role.ListItem, expected)
    assert shows(window, "No longer assigned to you — Your edits stay on this device and will")
    screenshot(window, artifacts / "scope-row-no-longer-assigned-360x720.png")

    click(window, row)
    run.until(lambda: app_vm.editor.loaded and app_vm.keepOffline.outOfScope)
    run(app_vm.wait_idle())
    run.pause(0.1)
    assert shows(window, "No longer assigned to you")
    assert shows(window, "will be sent; then it leaves this device. Or discard them now.")
    screenshot(window, artifacts / "scope-editor-no-longer-assigned-360x720.png")

    # Discarding asks first; "Keep them" keeps them.
    click(window, find(window, "discardEditsButton"))
    run.pause(0.1)
    assert shows(window, "Discard your edits of this work order?")
    click(window, find(window, "keepEditsButton"))
    run.pause(0.1)
    assert not shows(window, "Discard your edits of this work order?")
    assert store.cache.get(valve) is not None
    click(window, find(window, "discardEditsButton"))
    run.pause(0.1)
    click(window, find(window, "confirmDiscardButton"))
    run.until(lambda: app_vm.page == "list" and app_vm.workOrders.total == 1)
    run.pause(0.1)
    assert store.cache.get(valve) is None
    assert "Replace valve" not in texts_shown(window)
    assert shows(window, "Your edits were discarded; the work order left this device.")
    unsent = store.db.execute_sql(
        "SELECT COUNT(*) FROM jobs WHERE entity_key = ? AND finished_at IS NULL", (valve,)
    ).fetchone()[0]
    assert unsent == 0


def test_search_page_says_it_needs_a_connection_when_the_server_is_unreachable(
    run: Runner,
    open_window: Open,
    device: Device,
    with_finder: None,
    artifacts: Path,
) -> None:
    device.connect(closed_port_url(), "token")
    app_vm, window = open_window(360, 720)
    device.start()
    run.until(lambda: app_vm.status.connectivity == "unreachable", 15)
    click(window, find(window, "searchButton"))
    assert app_vm.page == "search"
    run(app_vm.wait_idle())
    run.pause(0.1)
    assert accessible(find(window, "serverSearchField"))[1] == "Search all work orders"
    assert shows(window, "Searching every work order needs a connection to the server.")
    assert shows(window, "The server is not answering.")
    assert not find(window, "serverSearchButton").isEnabled()
    screenshot(window, artifacts / "scope-search-offline-360x720.png")


def test_a_search_that_finds_the_server_gone_says_so_instead_of_no_results(
    run: Runner,
    open_window: Open,
    server: EmbeddedServer,
    device: Device,
) -> None:
    device.sign_in(server, "phone-ana", finder=True)
    app_vm, window = open_window(360, 720)
    device.start()
    run.until(lambda: app_vm.status.connectivity == "online", 15)
    app_vm.open("search")
    run(app_vm.wait_idle())
    assert find(window, "serverSearchButton").isEnabled()
    server.stop()  # killed between the last sync and the search
    type_into(window, find(window, "serverSearchField"), "valve")
    click(window, find(window, "serverSearchButton"))
    run.until(lambda: not app_vm.search.loading and app_vm.search.connectionNotice != "", 15)
    run.pause(0.1)
    assert shows(window, "needs a connection to the server. The server is not answering.")
    assert not shows(window, "No work order matches")
    assert not find(window, "serverSearchButton").isEnabled()


@pytest.mark.parametrize("size", [(360, 720), (1280, 800)], ids=["360x720", "1280x800"])
def test_the_team_is_edited_beside_the_assignee(
    run: Runner, open_window: Open, store: Store, anas_phone: list[str], size: Any
) -> None:
    app_vm, window = open_window(*size)
    app_vm.openWorkOrder(anas_phone[1])  # Inspect fire doors: bob, team north
    run.until(lambda: app_vm.editor.loaded)
    run(app_vm.wait_idle())
    run.pause(0.1)
    team, assignee = find(window, "teamField"), find(window, "assigneeField")
    assert accessible(team) == (Role.EditableText, "Team")
    assert team.property("text") == "north"
    assert assignee.property("text") == "bob"
    assert shows(window, "Team")
    top = lambda item: item.mapToScene(item.boundingRect().topLeft())  # noqa: E731
    if size[0] > 900:  # two columns: the team on the assignee's line, to its right
        assert top(team).y() == top(assignee).y()
        assert top(team).x() > top(assignee).x()
    else:  # one column: right under it
        assert 0 < top(team).y() - top(assignee).y() < 100

    type_into(window, team, "south")
    click(window, find(window, "saveButton"))
    run.until(lambda: not app_vm.editor.dirty and not app_vm.editor.saving)
    run(app_vm.wait_idle())
    (payload,) = store.db.execute_sql(
        "SELECT payload FROM jobs WHERE entity_key = ? AND finished_at IS NULL", (anas_phone[1],)
    ).fetchone()
    assert json.loads(payload)["fields"] == {"team": "south"}
    assert store.cache.get(anas_phone[1])["team"] == "south"
