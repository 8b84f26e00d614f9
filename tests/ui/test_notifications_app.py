"""The app's notifications on a private session bus (python-dbusmock's notification daemon):
a conflict the engine raises is one notification of normal urgency, and invoking its action
opens that conflict in the window; the Settings switch turns them off."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from dbus_fast import Variant

from app.desktop.notifications import Notifier
from app.events import ConflictRaised, EventBus
from app.store.store import Store
from tests.support.dbus import Mock, PrivateBus, dbus_marks, eventually, private_bus
from tests.ui.conftest import Open, Runner, make_conflict
from tests.ui.qml_driver import click, find, shows
from ui.main import desktop_notifier
from ui.services import Services
from ui.viewmodels.app import AppViewModel

pytestmark = dbus_marks()


#: The notification daemon's mock, the app's view-model and window, and its notifier.
Notifying = tuple[Mock, AppViewModel, Any, Notifier]


@pytest.fixture
def dbus() -> Iterator[PrivateBus]:
    with private_bus() as running:
        yield running


@pytest.fixture
def notifying(
    run: Runner, open_window: Open, store: Store, bus: EventBus, services: Services,
    dbus: PrivateBus,
) -> Iterator[Notifying]:  # fmt: skip
    """A phone-sized window whose notifier runs on the private bus's notification daemon."""
    daemon = dbus.mock("notification_daemon")
    app_vm, window = open_window(360, 720)
    notifier = desktop_notifier(store, services.executor, bus, app_vm, window)
    task = asyncio.ensure_future(notifier.run(), loop=run.loop)
    try:
        yield daemon, app_vm, window, notifier
    finally:
        task.cancel()
        run(asyncio.gather(task, return_exceptions=True))


def test_a_conflict_notifies_once_and_its_action_opens_it(
    run: Runner, store: Store, bus: EventBus, notifying: Notifying
) -> None:
    daemon, app_vm, window, notifier = notifying
    entity_id, job_id = make_conflict(store, "Replace valve at gate 4")
    bus.publish(ConflictRaised(entity_id, job_id, "version"))  # as the engine does

    async def notified() -> bool:
        return len(await daemon.calls("Notify")) == 1

    run(eventually(notified))
    (call,) = run(daemon.calls("Notify"))
    assert call[3] == "A change needs you"
    assert call[6]["urgency"].value == 1
    assert call[6]["desktop-entry"].value == "io.github.fieldsync.Fieldsync"
    assert app_vm.page == "list"

    # The person taps it: the window shows that conflict.
    shown = notifier._ids["conflict"]
    run(daemon.emit("ActionInvoked", "us", [Variant("u", shown), Variant("s", "default")]))
    run.until(lambda: app_vm.page == "conflict", timeout=5)
    run(app_vm.wait_idle())
    run.until(lambda: shows(window, "Valve ordered, do not open"))


def test_the_settings_switch_turns_notifications_off(
    run: Runner, store: Store, bus: EventBus, notifying: Notifying
) -> None:
    daemon, app_vm, window, notifier = notifying
    app_vm.open("settings")
    run(app_vm.wait_idle())
    switch = find(window, "notificationsSwitch")
    assert switch.property("checked")
    click(window, switch)
    run(app_vm.wait_idle())
    assert not switch.property("checked")
    assert shows(window, "Nothing is shown outside the app")
    entity_id, job_id = make_conflict(store)
    bus.publish(ConflictRaised(entity_id, job_id, "version"))
    run.pause(0.5)
    assert run(daemon.calls("Notify")) == []


@pytest.mark.parametrize(
    ("target", "page"),
    [("dead", "dead"), ("signin", "signin"), ("conflict", "conflict"), ("nonsense", "list")],
)
def test_a_notifications_target_opens_its_page(
    run: Runner, open_window: Open, target: str, page: str
) -> None:
    app_vm, _ = open_window(360, 720)
    app_vm.openTarget(target)
    run(app_vm.wait_idle())
    assert app_vm.page == page
