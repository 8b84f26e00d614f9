"""Sleep and wake through logind: the suspend waits for a send in progress; wake syncs at once.

While the engine sends (a flush, a pull, an upload: its `SyncProgress`/`UploadProgress`
events) the `SleepGuard` holds a logind *delay* inhibitor
(``org.freedesktop.login1.Manager.Inhibit("sleep", who, why, "delay")``), so a suspend asked
for meanwhile waits, up to logind's own ``InhibitDelayMaxSec``, for the batch to finish
instead of cutting it; it lets go when the engine is idle, and after `MAX_HOLD_S` at most, so
a long drain never keeps a phone awake. On ``PrepareForSleep(true)`` it tells the engine to
start no new request (`SyncEngine.prepare_for_sleep`) and lets go at once: the suspend goes
on. On ``PrepareForSleep(false)`` (resumed) the engine asks the server at once and syncs
(`SyncEngine.resumed`): the first network event after a resume can be missed, and deadlines
that fell due in the sleep are due now. Without a system bus or logind it does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Protocol

from dbus_fast import Message, MessageType
from dbus_fast.aio import MessageBus

from app.desktop.bus import DesktopError, add_match, call, connect, has_owner
from app.events import Event, EventBus, SyncProgress, UploadProgress
from app.states import AttachmentState

__all__ = ["MAX_HOLD_S", "SleepAware", "SleepGuard"]

log = logging.getLogger(__name__)

#: The longest a send keeps a suspend waiting (logind caps it too: 5 s by default).
MAX_HOLD_S = 30.0

_LOGIND = "org.freedesktop.login1"
_PATH = "/org/freedesktop/login1"
_MANAGER = "org.freedesktop.login1.Manager"


class SleepAware(Protocol):
    """What of the sync engine sleep and wake drive."""

    def prepare_for_sleep(self) -> None: ...

    def resumed(self) -> None: ...


def sending(event: Event) -> bool | None:
    """Does ``event`` say a send is under way (True), over (False), or neither (None)?"""
    match event:
        case SyncProgress(phase="idle"):
            return False
        case SyncProgress():
            return True
        case UploadProgress(state=AttachmentState.UPLOADING):
            return True
    return None


class SleepGuard:
    """Holds a delay inhibitor while the engine sends; follows logind's PrepareForSleep."""

    def __init__(
        self,
        engine: SleepAware,
        *,
        max_hold_s: float = MAX_HOLD_S,
        connect_bus: Callable[[], Awaitable[MessageBus | None]] | None = None,
    ) -> None:
        self._engine = engine
        self._max_hold_s = max_hold_s
        self._connect_bus = connect_bus or (lambda: connect(system=True, unix_fds=True))
        self._busy = False
        self._asleep = False
        self._changed = asyncio.Event()
        self._fd: int | None = None
        self._held_since = 0.0

    @property
    def holding(self) -> bool:
        return self._fd is not None

    def subscribe(self, events: EventBus) -> None:
        events.subscribe(self.on_event)

    def on_event(self, event: Event) -> None:
        busy = sending(event)
        if busy is not None and busy != self._busy:
            self._busy = busy
            self._changed.set()

    async def run(self) -> None:
        """Follow the engine and logind until cancelled (at once where there is no logind)."""
        bus = await self._connect_bus()
        if bus is None:
            return
        try:
            bus.add_message_handler(self._on_message)
            try:
                if not await has_owner(bus, _LOGIND):
                    log.info("no logind: sleep and wake not followed")
                    return
                await add_match(
                    bus, f"type='signal',interface='{_MANAGER}',member='PrepareForSleep'"
                )
            except DesktopError as exc:
                log.info("not following sleep: %s", exc)
                return
            await self._follow(bus)
        finally:
            self._release()
            bus.disconnect()

    async def _follow(self, bus: MessageBus) -> None:
        loop = asyncio.get_running_loop()
        used_up = False  # this drain held the inhibitor for its whole allowance already
        while True:
            timeout = None
            if self._fd is not None:
                timeout = max(self._held_since + self._max_hold_s - loop.time(), 0.0)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._changed.wait()
            self._changed.clear()
            now = loop.time()
            if not self._busy or self._asleep:
                self._release()
                used_up = False
            elif self._fd is not None and now - self._held_since >= self._max_hold_s:
                self._release()  # bounded: a long drain does not keep the phone awake
                used_up = True
            elif self._fd is None and not used_up:
                await self._inhibit(bus)
                self._held_since = now

    async def _inhibit(self, bus: MessageBus) -> None:
        try:
            reply = await call(
                bus, _LOGIND, _PATH, _MANAGER, "Inhibit", "ssss",
                ["sleep", "Fieldsync", "Sending changes to the server", "delay"],
            )  # fmt: skip
        except DesktopError as exc:
            log.info("no sleep inhibitor: %s", exc)
            return
        index = int(reply.body[0])
        fds = reply.unix_fds or []
        self._fd = fds[index] if index < len(fds) else None

    def _release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _on_message(self, message: Message) -> bool:
        is_sleep = (
            message.message_type == MessageType.SIGNAL
            and message.interface == _MANAGER
            and message.member == "PrepareForSleep"
        )
        if not is_sleep or not message.body:
            return False
        if bool(message.body[0]):
            self._asleep = True
            self._engine.prepare_for_sleep()
            self._release()  # the suspend goes on: nothing new will start
        else:
            self._asleep = False
            self._engine.resumed()
        self._changed.set()
        return False
