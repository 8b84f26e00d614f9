"""Connecting to a D-Bus bus and calling it with a deadline, missing buses tolerated.

`connect` returns None (and logs why, once per caller) where there is no bus: a phone image
without a session bus, a container, a test. `call` wraps one method call with a timeout and
turns a D-Bus error reply into `DesktopError`, so callers handle one exception family.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from dbus_fast import BusType, Message, MessageType
from dbus_fast.aio import MessageBus

__all__ = ["CALL_TIMEOUT_S", "DesktopError", "add_match", "call", "connect", "has_owner"]

log = logging.getLogger(__name__)

#: A desktop service that does not answer within this is treated as absent for this call.
CALL_TIMEOUT_S = 3.0


class DesktopError(Exception):
    """A D-Bus call failed: no such service, an error reply, no answer in time."""


async def connect(system: bool = False, *, unix_fds: bool = False) -> MessageBus | None:
    """The session (or system) bus, or None where there is none; ``unix_fds`` to receive
    file descriptors (logind's inhibitor is one)."""
    kind = BusType.SYSTEM if system else BusType.SESSION
    try:
        async with asyncio.timeout(CALL_TIMEOUT_S):
            return await MessageBus(bus_type=kind, negotiate_unix_fd=unix_fds).connect()
    except Exception as exc:
        # dbus-fast raises its own AuthError, InvalidAddressError...: any failure to
        # connect means the same here (no bus), and the app goes on without it.
        log.info("no %s bus: %s", "system" if system else "session", exc)
        return None


async def call(
    bus: MessageBus,
    destination: str,
    path: str,
    interface: str,
    member: str,
    signature: str = "",
    body: list[Any] | None = None,
    timeout_s: float = CALL_TIMEOUT_S,
) -> Message:
    """One method call; its reply, or DesktopError."""
    message = Message(
        destination=destination,
        path=path,
        interface=interface,
        member=member,
        signature=signature,
        body=body or [],
    )
    try:
        async with asyncio.timeout(timeout_s):
            reply = await bus.call(message)
    except TimeoutError:
        raise DesktopError(f"{destination} did not answer {member} in {timeout_s} s") from None
    except Exception as exc:
        # dbus-fast raises a bare Exception for a connection it lost: a desktop service
        # gone is a DesktopError like any other, translated here only.
        raise DesktopError(f"{destination}: {exc}") from None
    if reply is None:
        raise DesktopError(f"{destination} sent no reply to {member}")
    if reply.message_type == MessageType.ERROR:
        detail = reply.body[0] if reply.body else ""
        raise DesktopError(f"{destination}: {reply.error_name} {detail}".strip())
    return reply


async def add_match(bus: MessageBus, rule: str) -> None:
    """Ask the bus for the signals ``rule`` matches (its handlers see them)."""
    await call(
        bus,
        "org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus",
        "AddMatch",
        "s",
        [rule],
    )


async def has_owner(bus: MessageBus, name: str) -> bool:
    """Does a service own ``name`` on this bus now?"""
    reply = await call(
        bus,
        "org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus",
        "NameHasOwner",
        "s",
        [name],
    )
    return bool(reply.body[0])
