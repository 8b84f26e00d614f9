"""Notifications on a private session bus, python-dbusmock's notification daemon standing in
for the desktop's: what needs the person, one per kind updated in place, normal urgency, the
app's icon and desktop entry, an action that names its page; nothing for routine syncs, when
turned off, or where no notification server runs."""

from __future__ import annotations

import asyncio
from typing import Any

from dbus_fast import Variant

from app.desktop.notifications import APP_ID, URGENCY_NORMAL, Notifier, notice_for
from app.events import (
    AuthRequired,
    ConflictRaised,
    EventBus,
    JobStateChanged,
    JobStatesChanged,
    LastSyncChanged,
    QueueChanged,
    SyncProgress,
    UploadProgress,
)
from app.states import AttachmentState, JobStatus
from tests.support.dbus import Mock, PrivateBus, dbus_marks, eventually

pytestmark = dbus_marks()


class Running:
    """A notifier following a bus, run as its owner runs it; the actions it was asked for."""

    def __init__(self, enabled: bool = True) -> None:
        self.events = EventBus()
        self.actions: list[str] = []
        self.enabled = enabled

        async def is_enabled() -> bool:
            return self.enabled

        self.notifier = Notifier(enabled=is_enabled, on_action=self.actions.append)
        self.notifier.subscribe(self.events)
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Running:
        self.task = asyncio.create_task(self.notifier.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def notify_calls(mock: Mock) -> list[list[Any]]:
    return await mock.calls("Notify")


async def test_a_conflict_is_one_normal_notification_updated_in_place(dbus: PrivateBus) -> None:
    mock = dbus.mock("notification_daemon")
    async with Running() as running:
        running.events.publish(ConflictRaised("wo-1", 7, "version"))
        await eventually(lambda: _count(mock, 1))
        (app, replaces, icon, summary, body, actions, hints, timeout) = (await notify_calls(mock))[
            0
        ]
        assert (app, replaces, icon) == ("Fieldsync", 0, APP_ID)
        assert summary == "A change needs you"
        assert "conflicts with the server's version" in body
        assert actions == ["default", "Open"]
        assert hints["urgency"].value == URGENCY_NORMAL == 1  # never 2, critical
        assert hints["desktop-entry"].value == APP_ID
        assert timeout == -1

        # A second conflict updates the same notification, with a count.
        running.events.publish(ConflictRaised("wo-2", 8, "version"))
        await eventually(lambda: _count(mock, 2))
        second = (await notify_calls(mock))[1]
        first_id = await _last_id(running)
        assert second[1] == first_id != 0  # replaces_id: the one on screen
        assert second[3] == "2 changes need you"

        # Its action opens the conflicts (several: the list, not the first one's).
        await mock.emit("ActionInvoked", "us", [Variant("u", first_id), Variant("s", "default")])
        await eventually(lambda: _true(running.actions == ["conflict"]))


async def test_a_single_conflicts_action_opens_that_conflict(dbus: PrivateBus) -> None:
    mock = dbus.mock("notification_daemon")
    async with Running() as running:
        running.events.publish(ConflictRaised("wo-9", 3, "version"))
        await eventually(lambda: _count(mock, 1))
        shown = await _last_id(running)
        await mock.emit("ActionInvoked", "us", [Variant("u", shown), Variant("s", "default")])
        await eventually(lambda: _true(running.actions == ["conflict:wo-9"]))
        # Seen: the next conflict is a new count of one.
        running.events.publish(ConflictRaised("wo-10", 4, "version"))
        await eventually(lambda: _count(mock, 2))
        assert (await notify_calls(mock))[1][3] == "A change needs you"


async def test_each_kind_that_needs_the_person_has_its_own_notification(
    dbus: PrivateBus,
) -> None:
    mock = dbus.mock("notification_daemon")
    async with Running() as running:
        dead = JobStateChanged(1, "wo-1", JobStatus.DEAD, "refused")
        running.events.publish(JobStatesChanged((dead,)))
        running.events.publish(
            UploadProgress("att-1", "wo-2", AttachmentState.FAILED, 0, 10, "too large")
        )
        running.events.publish(AuthRequired("http://server", "token revoked"))
        await eventually(lambda: _count(mock, 3))
        summaries = [call[3] for call in await notify_calls(mock)]
        assert summaries == [
            "A change could not be sent",
            "A file did not upload",
            "Signed out of Fieldsync",
        ]
        assert all(call[1] == 0 for call in await notify_calls(mock))  # three, not one
        assert all(call[6]["urgency"].value == 1 for call in await notify_calls(mock))


async def test_routine_syncs_say_nothing(dbus: PrivateBus) -> None:
    mock = dbus.mock("notification_daemon")
    routine = [
        SyncProgress(3, 10, "flush"),
        SyncProgress(0, 0, "idle"),
        LastSyncChanged(1.0),
        QueueChanged({"pending": 0}, None),
        JobStatesChanged((JobStateChanged(1, "wo-1", JobStatus.DONE),)),
        UploadProgress("att-1", "wo-1", AttachmentState.UPLOADED, 10, 10),
    ]
    assert [notice_for(event) for event in routine] == [None] * len(routine)
    async with Running() as running:
        for event in routine:
            running.events.publish(event)
        running.events.publish(AuthRequired("http://server", "revoked"))  # a marker
        await eventually(lambda: _count(mock, 1))
        assert (await notify_calls(mock))[0][3] == "Signed out of Fieldsync"


async def test_turned_off_nothing_is_sent(dbus: PrivateBus) -> None:
    mock = dbus.mock("notification_daemon")
    async with Running(enabled=False) as running:
        running.events.publish(ConflictRaised("wo-1", 7, "version"))
        await asyncio.sleep(0.3)
        assert await notify_calls(mock) == []
        running.enabled = True
        running.events.publish(ConflictRaised("wo-1", 7, "version"))
        await eventually(lambda: _count(mock, 1))


async def test_without_a_notification_server_nothing_breaks(dbus: PrivateBus) -> None:
    async with Running() as running:
        running.events.publish(ConflictRaised("wo-1", 7, "version"))
        await asyncio.sleep(0.5)
        assert running.notifier.sent == 0
        assert running.task is not None
        assert not running.task.done()  # still there for when one starts
        mock = dbus.mock("notification_daemon")
        running.events.publish(ConflictRaised("wo-2", 8, "version"))
        await eventually(lambda: _count(mock, 1))


async def test_without_a_session_bus_nothing_breaks(monkeypatch: Any) -> None:
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
    async with Running() as running:
        running.events.publish(ConflictRaised("wo-1", 7, "version"))
        await asyncio.sleep(0.5)
        assert running.notifier.sent == 0
        assert running.task is not None
        assert not running.task.done()


async def _count(mock: Mock, n: int) -> bool:
    return len(await notify_calls(mock)) >= n


async def _true(value: bool) -> bool:
    return value


async def _last_id(running: Running) -> int:
    ids = list(running.notifier._ids.values())
    assert ids
    return ids[-1]


async def test_the_workers_action_starts_the_app_on_its_page(
    dbus: PrivateBus, tmp_path: Any
) -> None:
    from app.desktop import launch
    from app.executor import StoreExecutor
    from app.store.store import Store
    from app.sync.engine import SyncConfig, SyncEngine

    started: list[list[str]] = []

    def open_app(data_dir: Any, server_url: str, target: str) -> None:
        started.append(launch.app_command(data_dir, server_url, target))  # no GUI here

    mock = dbus.mock("notification_daemon")
    executor = StoreExecutor()
    with Store(tmp_path / "device") as store:
        engine = SyncEngine(
            store, SyncConfig(server_url="http://127.0.0.1:9"), token=lambda: "t",
            executor=executor,
        )  # fmt: skip
        notifier = launch.worker_notifier(engine, store.data_dir, open_app=open_app)
        task = asyncio.create_task(notifier.run())
        try:
            engine.events.publish(ConflictRaised("wo-7", 1, "version"))
            await eventually(lambda: _count(mock, 1))
            shown = notifier._ids["conflict"]
            await mock.emit("ActionInvoked", "us", [Variant("u", shown), Variant("s", "default")])
            await eventually(lambda: _true(len(started) == 1))
            assert started[0] == launch.app_command(
                store.data_dir, "http://127.0.0.1:9", "conflict:wo-7"
            )
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await engine.client.aclose()
            executor.shutdown()


async def test_a_notification_server_that_restarts_is_found_again(dbus: PrivateBus) -> None:
    first = dbus.mock("notification_daemon")
    async with Running() as running:
        running.events.publish(ConflictRaised("wo-1", 7, "version"))
        await eventually(lambda: _count(first, 1))
        dbus.stop_mock(first)  # the desktop's daemon went away...
        running.events.publish(ConflictRaised("wo-2", 8, "version"))
        await asyncio.sleep(0.5)
        second = dbus.mock("notification_daemon")  # ...and came back
        running.events.publish(ConflictRaised("wo-3", 9, "version"))
        await eventually(lambda: _count(second, 1))
        assert running.task is not None
        assert not running.task.done()
