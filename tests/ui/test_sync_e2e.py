"""The app's view-models over the real sync engine and the real server (in-process, port 0).

Saving offline shows "pending"; once the engine reaches the server the badge clears when the
server acknowledges; a saved edit wakes the engine at once; a revoked token brings the person
back to the sign-in page.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import shiboken6

from app.events import EventBus
from app.store.store import Store
from app.sync.connectivity import ConnectivityConfig
from app.sync.engine import SyncConfig, SyncEngine
from app.sync.transport import TransportConfig
from server.auth import revoke_device
from server.embedded import EmbeddedServer, start_server
from tests.ui.conftest import Runner
from tests.ui.qml_driver import find
from ui.qt import QQmlApplicationEngine
from ui.services import Services
from ui.viewmodels.app import AppViewModel
from ui.window import load_window


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedServer]:
    with start_server(f"sqlite:///{tmp_path / 'server.sqlite3'}", rate_limit_per_second=0) as s:
        yield s


def closed_port_url() -> str:
    """A loopback URL nobody listens on: connection refused at once, like no signal."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def make_engine(store: Store, bus: EventBus, services: Services, url: str, token: str) -> Any:
    config = SyncConfig(
        server_url=url,
        reconnect_jitter_s=0,
        sweep_interval_s=30.0,
        transport=TransportConfig(connect_timeout=1.0, read_timeout=5.0),
        connectivity=ConnectivityConfig(failures_before_offline=1),
    )
    return SyncEngine(store, config, bus, token=lambda: token, executor=services.executor)


class EngineRun:
    """An engine running on the test's loop, stopped (and awaited) when the test ends."""

    def __init__(self, run: Runner) -> None:
        self.run = run
        self.running: list[tuple[Any, asyncio.Task[Any]]] = []

    def start(self, engine: Any) -> None:
        self.running.append((engine, self.run.loop.create_task(engine.run())))

    def stop_all(self) -> None:
        for engine, task in self.running:
            self.run(engine.stop(grace_s=2.0))
            if not task.done():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                self.run(_settle(task))
        self.running = []


async def _settle(task: asyncio.Task[Any]) -> None:
    with contextlib.suppress(asyncio.CancelledError):
        await task


@pytest.fixture
def engines(run: Runner) -> Iterator[EngineRun]:
    owner = EngineRun(run)
    yield owner
    owner.stop_all()


def row_badge(app_vm: AppViewModel, entity_id: str) -> str:
    row = app_vm.workOrders.row_of(entity_id)
    return app_vm.workOrders.get(row).get("badge", "") if row >= 0 else ""


def save_new(run: Runner, app_vm: AppViewModel, title: str) -> str:
    app_vm.newWorkOrder()
    app_vm.editor.setField("title", title)
    app_vm.editor.save()
    run.until(lambda: app_vm.editor.entityId != "")
    return str(app_vm.editor.entityId)


def test_offline_edit_is_pending_then_synced_when_the_server_acknowledges(
    run: Runner,
    services: Services,
    store: Store,
    bus: EventBus,
    server: EmbeddedServer,
    engines: EngineRun,
    root: Any,
) -> None:
    token = server.add_device("phone-1")
    offline = make_engine(store, bus, services, closed_port_url(), token)
    services.engine = offline
    app_vm = AppViewModel(services, root)
    app_vm.start()
    engines.start(offline)
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
    engines.stop_all()
    online = make_engine(store, bus, services, server.base_url, token)
    services.engine = online
    engines.start(online)
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
    run: Runner,
    services: Services,
    store: Store,
    bus: EventBus,
    server: EmbeddedServer,
    engines: EngineRun,
    root: Any,
) -> None:
    token = server.add_device("phone-2")
    engine = make_engine(store, bus, services, server.base_url, token)
    services.engine = engine
    services.server_url = server.base_url
    app_vm = AppViewModel(services, root)
    qml = QQmlApplicationEngine()
    window = load_window(qml, app_vm, 360, 720, dark=False)
    try:
        app_vm.start()
        engines.start(engine)
        first = save_new(run, app_vm, "Before revocation")
        run.until(lambda: row_badge(app_vm, first) == "synced", timeout=10)
        app_vm.back()

        assert revoke_device(server.store, "phone-2")
        save_new(run, app_vm, "After revocation")
        run.until(lambda: app_vm.page == "signin", timeout=10)
        assert find(window, "signInPage").isVisible()
        assert "token" in find(window, "reasonLabel").property("text")
        assert find(window, "serverField").property("text") == server.base_url
        assert app_vm.status.connectivity == "signed_out"
        assert engine.auth_paused
    finally:
        run(app_vm.aclose())
        window.close()
        shiboken6.delete(qml)
