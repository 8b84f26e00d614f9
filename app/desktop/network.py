"""NetworkManager's view of the network, as the engine's OS hint where Qt has none.

The app asks Qt's QNetworkInformation first (`ui.main`); where no backend loads (a minimal
phone image) and in the headless worker, `NetworkWatch` reads NetworkManager over the system
bus: its ``State`` and ``Connectivity`` at start, then ``StateChanged`` and property changes.
A hint only (`app.sync.connectivity`): going online wakes a sleeping engine to probe at once;
the server's answers still decide. Without NetworkManager it does nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from dbus_fast import Message, MessageType, Variant
from dbus_fast.aio import MessageBus

from app.desktop.bus import DesktopError, add_match, call, connect

__all__ = ["NetworkWatch", "os_hint"]

log = logging.getLogger(__name__)

_NM = "org.freedesktop.NetworkManager"
_PATH = "/org/freedesktop/NetworkManager"
_PROPERTIES = "org.freedesktop.DBus.Properties"

# NMState and NMConnectivityState (NetworkManager's D-Bus API).
_STATE_CONNECTED_LOCAL = 50
_STATES_OFFLINE = (10, 20, 30)  # asleep, disconnected, disconnecting
_CONNECTIVITY_NONE = 1
_CONNECTIVITY_FULL = 4
_METERED = (1, 3)  # NMMetered: yes, guess-yes


class HintTaker(Protocol):
    def set_os_hint(self, online: bool | None, metered: bool = False) -> None: ...


def os_hint(state: int, connectivity: int) -> bool | None:
    """True: worth trying the server; False: no network at all; None: NetworkManager does
    not know. A local network counts (the server may be on it)."""
    if connectivity == _CONNECTIVITY_FULL:
        return True
    if state in _STATES_OFFLINE or connectivity == _CONNECTIVITY_NONE:
        return False
    if state >= _STATE_CONNECTED_LOCAL:
        return True
    return None


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Variant) else value


class NetworkWatch:
    """Feeds NetworkManager's state to ``engine.set_os_hint`` whenever it changes."""

    def __init__(
        self,
        engine: HintTaker,
        connect_bus: Callable[[], Awaitable[MessageBus | None]] | None = None,
    ) -> None:
        self._engine = engine
        self._connect_bus = connect_bus or (lambda: connect(system=True))
        self._props: dict[str, int] = {"State": 0, "Connectivity": 0, "Metered": 0}
        self._told: tuple[bool | None, bool] | None = None

    async def run(self) -> None:
        """Follow NetworkManager until cancelled (returns at once where there is none)."""
        bus = await self._connect_bus()
        if bus is None:
            return
        try:
            bus.add_message_handler(self._on_message)
            try:
                await add_match(bus, f"type='signal',sender='{_NM}',path='{_PATH}'")
                reply = await call(bus, _NM, _PATH, _PROPERTIES, "GetAll", "s", [_NM])
            except DesktopError as exc:
                log.info("no NetworkManager: %s", exc)
                return
            self._update(reply.body[0])
            await asyncio.Event().wait()  # signals arrive through the handler
        finally:
            bus.disconnect()

    def _update(self, changed: dict[str, Any]) -> None:
        for name in self._props:
            if name in changed:
                self._props[name] = int(_plain(changed[name]))
        hint = (
            os_hint(self._props["State"], self._props["Connectivity"]),
            self._props["Metered"] in _METERED,
        )
        if hint != self._told:
            self._told = hint
            self._engine.set_os_hint(*hint)

    def _on_message(self, message: Message) -> bool:
        if message.message_type != MessageType.SIGNAL or message.path != _PATH:
            return False
        body = message.body
        if message.interface == _NM and message.member == "StateChanged" and body:
            self._update({"State": body[0]})
        elif message.interface == _NM and message.member == "PropertiesChanged" and body:
            self._update(body[0])  # NetworkManager's own (older) signal
        elif message.member == "PropertiesChanged" and len(body) >= 2 and body[0] == _NM:
            self._update(body[1])
        return False
