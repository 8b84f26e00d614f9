"""The app's view-models over the real sync engine and the real server (in-process, port 0).

Saving offline shows "pending"; once the engine reaches the server the badge clears when the
server acknowledges; a saved edit wakes the engine at once; a revoked token brings the person
back to the sign-in page.
"""

from __future__ import annotations

import time
from typing import Any

import shiboken6

from server.auth import revoke_device
from server.embedded import EmbeddedServer
from tests.sync.sync_support import closed_port_url
from tests.ui.conftest import Device, Runner
from tests.ui.qml_driver import click, find, shows
from ui.qt import QQmlApplicationEngine, connect
from ui.services import Services
from ui.viewmodels.app import AppViewModel
from ui.window import load_window


def row_badge(app_vm: AppViewModel, entity_id: str) -> str:
    row = app_vm.workOrders.row_of(entity_id)
    return app_vm.workOrders.get(row).get("badge", "") if row >= 0 else ""


def save_new_while_signing_out(run: Runner, app_vm: AppViewModel, title: str) -> str:
    """Saves a new work order, waiting for the save itself rather than the form showing it:
    a sign-out that lands while the save is under way takes the person to the sign-in page
    (the save goes on), and the editor it closed never shows the saved work order."""
    saved: list[str] = []
    connect(app_vm.editor.saved, saved.append)
    app_vm.newWorkOrder()
    app_vm.editor.setField("title", title)
    app_vm.editor.save()
    run.until(lambda: bool(saved))
    return saved[0]


def save_new(run: Runner, app_vm: AppViewModel, title: str) -> str:
    """Saves a new work order and waits until the form shows it."""
    entity_id = save_new_while_signing_out(run, app_vm, title)
    run.until(lambda: app_vm.editor.entityId == entity_id)
    return entity_id


def test_offline_edit_is_pending_then_synced_when_the_server_acknowledges(
    run: Runner, services: Services, server: EmbeddedServer, device: Device, root: Any
) -> None:
    device.connect(closed_port_url(), server.add_device("phone-1"))
    app_vm = AppViewModel(services, root)
    app_vm.start()
    device.start()
    run(app_vm.wait_idle())

    entity_id = save_new(run, app_vm, "Inspect boiler offline")
    run.until(lambda: row_badge(app_vm, entity_id) in ("pending", "retrying"))
    # A network but no server answering is "unreachable" (issue 12); "offline" is the OS's.
    run.until(lambda: app_vm.status.connectivity == "unreachable", timeout=10)
    assert app_vm.status.pendingCount == 1
    assert app_vm.editor.unsynced
    assert server.store.tables.WorkOrder.get_or_none(id=entity_id) is None

    # Back in coverage: an engine that reaches the real server delivers, and the badge clears
    # only once the server has acknowledged (the record is on the server by then).
    device.stop()
    online = device.connect(server.base_url)
    device.start()
    online.set_os_hint(True)
    run.until(lambda: row_badge(app_vm, entity_id) == "synced", timeout=15)
    on_server = server.store.tables.WorkOrder.get_or_none(id=entity_id)
    assert on_server is not None
    assert on_server.title == "Inspect boiler offline"
    run.until(lambda: app_vm.status.pendingCount == 0 and app_vm.status.connectivity == "online")
    run.until(lambda: not app_vm.editor.unsynced)

    # The engine now sleeps until its next sweep (30 s): only the save's wake() makes the
    # second edit reach the server within a few seconds.
    second = save_new(run, app_vm, "Second edit, online")
    run.until(lambda: row_badge(app_vm, second) == "synced", timeout=5)
    assert server.store.tables.WorkOrder.get_or_none(id=second) is not None
    run(app_vm.aclose())


def test_revoked_token_brings_back_the_sign_in_page(
    run: Runner, services: Services, server: EmbeddedServer, device: Device, root: Any
) -> None:
    device.sign_in(server, "phone-2")
    engine = device.engine
    services.server_url = server.base_url
    app_vm = AppViewModel(services, root)
    qml = QQmlApplicationEngine()
    window = load_window(qml, app_vm, 360, 720, dark=False)
    try:
        app_vm.start()
        device.start()
        first = save_new(run, app_vm, "Before revocation")
        run.until(lambda: row_badge(app_vm, first) == "synced", timeout=10)
        app_vm.back()

        assert revoke_device(server.store, "phone-2")
        after = save_new_while_signing_out(run, app_vm, "After revocation")
        run.until(lambda: app_vm.page == "signin", timeout=10)
        assert find(window, "signInPage").isVisible()
        assert "token" in find(window, "reasonLabel").property("text")
        assert find(window, "serverField").property("text") == server.base_url
        assert app_vm.status.connectivity == "signed_out"
        assert engine.auth_paused
        # Signed out, the save was kept on the device, still to be sent.
        assert services.store.cache.get(after) is not None
    finally:
        run(app_vm.aclose())
        window.close()
        shiboken6.delete(qml)


def test_a_failed_sync_now_leaves_no_online_on_the_status_bar(
    run: Runner, services: Services, server: EmbeddedServer, device: Device, root: Any
) -> None:
    """Issue 24: the server goes away; "Sync now" answers "Not synced: the server is
    unreachable." and from then on the bar says so, never "Online", and the failed pull
    is no sync (the last sync stays as it was)."""
    device.sign_in(server, "phone-3")
    app_vm = AppViewModel(services, root)
    qml = QQmlApplicationEngine()
    window = load_window(qml, app_vm, 360, 720, dark=False)
    messages: list[str] = []
    connect(app_vm.message, messages.append)
    try:
        app_vm.start()
        device.start()
        run.until(lambda: shows(window, "Online") and app_vm.status.lastSyncText != "", 15)
        run.pause(5.5)  # past "just now": a failed pull that counted as a sync would show
        synced_before = app_vm.status.lastSyncText
        server.stop()
        click(window, find(window, "syncNowButton"))
        run.until(lambda: "Not synced: the server is unreachable." in messages, 20)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert not shows(window, "Online")
            assert app_vm.status.lastSyncText != "Last synced just now"
            run.pause(0.05)
        assert shows(window, "Server unreachable")
        assert synced_before.startswith("Last synced ")
    finally:
        run(app_vm.aclose())
        window.close()
        shiboken6.delete(qml)
