"""Desktop notifications of what needs the person, through `org.freedesktop.Notifications`.

Only four things are worth interrupting someone for (`notice_for`): a conflict to settle, a
change the server refused, a file that did not upload, and being signed out. A routine sync
says nothing. Each kind is one notification, updated in place (``replaces_id``) with a count
instead of a stream; it is sent with normal urgency, never critical (Phosh wakes the screen
for critical ones), with the app's icon and its ``desktop-entry`` hint, and with a default
action whose target (`Notice.target`, e.g. ``conflict:<work order>``) the owner opens: the
app shows that page, the headless worker starts the app on it.

The `Notifier` follows the core's events (`EventBus` subscribers must not block: it queues)
and sends from `run()`, a task its owner runs. No notification server, no session bus, or the
setting turned off (`NOTIFICATIONS`): nothing is sent, and nothing else changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from dbus_fast import Message, MessageType, Variant
from dbus_fast.aio import MessageBus

from app.desktop.bus import DesktopError, add_match, call, connect
from app.events import (
    AuthRequired,
    ConflictRaised,
    Event,
    EventBus,
    JobStateChanged,
    JobStatesChanged,
    UploadProgress,
)
from app.states import AttachmentState, JobStatus
from app.store.settings import read_setting

__all__ = [
    "APP_ID",
    "NOTIFICATIONS",
    "URGENCY_NORMAL",
    "Notice",
    "Notifier",
    "load_notifications_enabled",
    "notice_for",
]

log = logging.getLogger(__name__)

#: The desktop entry (and icon) name the desktop knows the app by.
APP_ID = "io.github.fieldsync.Fieldsync"
#: The settings key: "0" turns notifications off (default on).
NOTIFICATIONS = "notifications"
#: The freedesktop urgency levels are 0 low, 1 normal, 2 critical: ours are always 1.
URGENCY_NORMAL = 1

_SERVICE = "org.freedesktop.Notifications"
_PATH = "/org/freedesktop/Notifications"


@dataclass(frozen=True)
class Notice:
    """One thing that needs the person. ``kind`` is one notification's slot; ``target`` is
    the page its action opens: ``conflict:<id>``, ``conflict``, ``dead``, ``editor:<id>``,
    ``signin``."""

    kind: str
    target: str


def notice_for(event: Event) -> Notice | None:
    """What an event means for the person, if anything needs them (else None)."""
    match event:
        case ConflictRaised(entity_id=entity_id):
            return Notice("conflict", f"conflict:{entity_id}")
        case JobStateChanged(status=JobStatus.DEAD):
            return Notice("failed_change", "dead")
        case JobStatesChanged(changes=changes) if any(
            change.status == JobStatus.DEAD for change in changes
        ):
            return Notice("failed_change", "dead")
        case UploadProgress(state=AttachmentState.FAILED, entity_id=entity_id):
            return Notice("failed_upload", f"editor:{entity_id}")
        case AuthRequired():
            return Notice("signed_out", "signin")
    return None


def _words(kind: str, count: int) -> tuple[str, str]:
    """(summary, body) of a kind's notification once ``count`` of its events came."""
    if kind == "conflict":
        if count == 1:
            return (
                "A change needs you",
                "Your edit of a work order conflicts with the server's version: "
                "choose what to keep.",
            )
        return (
            f"{count} changes need you",
            f"{count} edits conflict with the server's version: choose what to keep.",
        )
    if kind == "failed_change":
        what = "A change" if count == 1 else f"{count} changes"
        return (
            f"{what} could not be sent",
            "The server refused it. Open Failed changes to fix and retry, or discard it."
            if count == 1
            else "The server refused them. Open Failed changes to fix and retry, or discard.",
        )
    if kind == "failed_upload":
        what = "A file" if count == 1 else f"{count} files"
        return (f"{what} did not upload", "Open the work order to retry or remove it.")
    return ("Signed out of Fieldsync", "Sync is paused until you sign in again.")


def load_notifications_enabled(store: Any) -> bool:
    """The setting (blocking: on the store's executor)."""
    return read_setting(store, NOTIFICATIONS) != "0"


class Notifier:
    """Sends the `Notice`s of the events it follows; calls ``on_action(target)`` when the
    person invokes one. ``enabled()`` is asked before each (the setting may change)."""

    def __init__(
        self,
        *,
        enabled: Callable[[], Awaitable[bool]],
        on_action: Callable[[str], None],
        app_name: str = "Fieldsync",
        connect_bus: Callable[[], Awaitable[MessageBus | None]] = connect,
    ) -> None:
        self._enabled = enabled
        self._on_action = on_action
        self._app_name = app_name
        self._connect_bus = connect_bus
        self._queue: asyncio.Queue[Notice] = asyncio.Queue()
        self._bus: MessageBus | None = None
        self._ids: dict[str, int] = {}  # kind -> the notification showing it
        self._counts: dict[str, int] = {}  # kind -> events since the person last saw it
        self._targets: dict[int, str] = {}  # notification id -> what its action opens
        self.sent = 0

    def subscribe(self, events: EventBus) -> None:
        events.subscribe(self.on_event)

    def on_event(self, event: Event) -> None:
        notice = notice_for(event)
        if notice is not None:
            self._queue.put_nowait(notice)

    async def run(self) -> None:
        """Send each notice as it comes, until cancelled."""
        try:
            while True:
                notice = await self._queue.get()
                try:
                    await self.send(notice)
                except DesktopError as exc:
                    # No notification server (or one that failed, or a bus that went away):
                    # the app goes on; the next notice connects and tries again.
                    log.info("notification not shown: %s", exc)
                    await self.aclose()
                finally:
                    self._queue.task_done()
        finally:
            await self.aclose()

    async def drain(self, timeout_s: float) -> None:
        """Until every notice queued so far was sent (or ``timeout_s`` passed)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._queue.join()

    async def send(self, notice: Notice) -> int | None:
        """Show (or update) the notification of ``notice.kind``; its id, or None when off."""
        if not await self._enabled():
            return None
        bus = await self._bus_or_none()
        if bus is None:
            return None
        count = self._counts.get(notice.kind, 0) + 1
        summary, body = _words(notice.kind, count)
        # Several of a kind: the page that lists them, not the first one's.
        target = notice.target if count == 1 else notice.target.partition(":")[0]
        hints = {
            "urgency": Variant("y", URGENCY_NORMAL),
            "desktop-entry": Variant("s", APP_ID),
            "category": Variant("s", "transfer.error" if "failed" in notice.kind else "im"),
        }
        reply = await call(
            bus, _SERVICE, _PATH, _SERVICE, "Notify", "susssasa{sv}i",
            [self._app_name, self._ids.get(notice.kind, 0), APP_ID, summary, body,
             ["default", "Open"], hints, -1],
        )  # fmt: skip
        notification_id = int(reply.body[0])
        old = self._ids.get(notice.kind)
        if old is not None and old != notification_id:
            self._targets.pop(old, None)
        self._ids[notice.kind] = notification_id
        self._counts[notice.kind] = count
        self._targets[notification_id] = target
        self.sent += 1
        return notification_id

    async def aclose(self) -> None:
        bus, self._bus = self._bus, None
        if bus is not None:
            bus.disconnect()

    async def _bus_or_none(self) -> MessageBus | None:
        if self._bus is None:
            bus = await self._connect_bus()
            if bus is None:
                return None
            bus.add_message_handler(self._on_message)
            await add_match(bus, f"type='signal',interface='{_SERVICE}',path='{_PATH}'")
            self._bus = bus
        return self._bus

    def _on_message(self, message: Message) -> bool:
        if message.message_type != MessageType.SIGNAL or message.interface != _SERVICE:
            return False
        if message.member == "ActionInvoked" and len(message.body) == 2:
            target = self._targets.get(int(message.body[0]))
            if target is not None:
                self._forget(int(message.body[0]))
                self._on_action(target)
        elif message.member == "NotificationClosed" and message.body:
            self._forget(int(message.body[0]))
        return False

    def _forget(self, notification_id: int) -> None:
        """The person saw it (opened or dismissed): the next of its kind counts from one."""
        self._targets.pop(notification_id, None)
        for kind, shown in list(self._ids.items()):
            if shown == notification_id:
                del self._ids[kind]
                self._counts.pop(kind, None)
