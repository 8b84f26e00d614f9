"""A private D-Bus for tests, with python-dbusmock's templates standing in for the desktop.

`PrivateBus` starts its own `dbus-daemon` and points this process's session *and* system bus
addresses at it (so the code under test, which asks for either, finds it and nothing of the
machine's), until it stops. `PrivateBus.mock(template)` runs Debian's `python3 -m dbusmock
--template NAME` on it (the notification daemon, logind, NetworkManager); `Mock` reads the
calls a mock received and makes it emit signals, over D-Bus, with dbus-fast.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from dbus_fast import BusType, Message, MessageType, Variant
from dbus_fast.aio import MessageBus

SYSTEM_PYTHON = "/usr/bin/python3"
MOCK_IFACE = "org.freedesktop.DBus.Mock"

#: template -> (bus name, main object path, main interface, system bus?)
TEMPLATES = {
    "notification_daemon": (
        "org.freedesktop.Notifications",
        "/org/freedesktop/Notifications",
        "org.freedesktop.Notifications",
        False,
    ),
    "logind": (
        "org.freedesktop.login1",
        "/org/freedesktop/login1",
        "org.freedesktop.login1.Manager",
        True,
    ),
    "networkmanager": (
        "org.freedesktop.NetworkManager",
        "/org/freedesktop/NetworkManager",
        "org.freedesktop.NetworkManager",
        True,
    ),
}


@functools.cache  # asked by every module that uses it, at collection: probe once
def missing_tools() -> str:
    if shutil.which("dbus-daemon") is None:
        return "dbus-daemon is not installed"
    probe = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import dbusmock"], capture_output=True, check=False, timeout=30
    )
    if probe.returncode != 0:
        return "python3-dbusmock is not installed (scripts/system-deps.sh installs it)"
    return ""


def dbus_marks() -> list[pytest.MarkDecorator]:
    why = missing_tools()
    return [pytest.mark.skipif(bool(why), reason=why or "ok")]


async def eventually(condition: Callable[[], Awaitable[bool]], within: float = 5.0) -> None:
    """Until ``condition()`` holds (AssertionError after ``within`` seconds)."""
    try:
        async with asyncio.timeout(within):
            while not await condition():  # noqa: ASYNC110 - polls another process over D-Bus
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"not within {within} s: {condition}") from None


class Mock:
    """One dbusmock process on the private bus, read and driven over D-Bus."""

    def __init__(self, process: subprocess.Popen[Any], template: str) -> None:
        self.process = process
        self.name, self.path, self.interface, self.system = TEMPLATES[template]

    async def _call(
        self,
        member: str,
        signature: str = "",
        body: list[Any] | None = None,
        path: str = "",
        interface: str = MOCK_IFACE,
    ) -> list[Any]:
        """One call on the mock's bus (dbusmock's own interface unless told), its reply body."""
        kind = BusType.SYSTEM if self.system else BusType.SESSION
        bus = await MessageBus(bus_type=kind).connect()
        try:
            reply = await bus.call(
                Message(
                    destination=self.name,
                    path=path or self.path,
                    interface=interface,
                    member=member,
                    signature=signature,
                    body=body or [],
                )
            )
        finally:
            bus.disconnect()
        assert reply is not None
        assert reply.message_type != MessageType.ERROR, reply.body
        return list(reply.body)

    async def ask(self, member: str, signature: str = "", body: list[Any] | None = None) -> Any:
        """Call a method of the mocked service itself (logind's ListInhibitors...)."""
        reply = await self._call(member, signature, body, interface=self.interface)
        return reply[0] if reply else None

    async def mock_method(
        self, member: str, signature: str = "", body: list[Any] | None = None
    ) -> list[Any]:
        """Call one of the template's own convenience methods (SetConnectivity...)."""
        return await self._call(member, signature, body)

    async def calls(self, method: str, path: str = "") -> list[list[Any]]:
        """The arguments of each call of ``method`` so far, oldest first."""
        (calls,) = await self._call("GetMethodCalls", "s", [method], path)
        return [[arg.value for arg in args] for _, args in calls]

    async def emit(
        self, member: str, signature: str, args: list[Variant], interface: str = "", path: str = ""
    ) -> None:
        """Make the mocked service emit a signal of its main interface (or ``interface``)."""
        await self._call(
            "EmitSignal", "sssav", [interface or self.interface, member, signature, args], path
        )

    async def set_property(self, name: str, value: Variant, interface: str = "") -> None:
        """Change a property of the main object, as the service does (PropertiesChanged)."""
        iface = interface or self.interface
        await self._call("UpdateProperties", "sa{sv}", [iface, {name: value}])

    async def reset(self) -> None:
        await self._call("ClearCalls")


class PrivateBus:
    """A dbus-daemon of this test's own, as both the session and the system bus."""

    def __init__(self) -> None:
        self.daemon: subprocess.Popen[str] | None = None
        self.mocks: list[Mock] = []
        self.address = ""
        self._saved: dict[str, str | None] = {}

    def start(self) -> PrivateBus:
        self.daemon, self.address = start_daemon()
        for name in ("DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS"):
            self._saved[name] = os.environ.get(name)
            os.environ[name] = self.address
        return self

    @property
    def env(self) -> dict[str, str]:
        """An environment for a subprocess on this bus."""
        return {
            **os.environ,
            "DBUS_SESSION_BUS_ADDRESS": self.address,
            "DBUS_SYSTEM_BUS_ADDRESS": self.address,
        }

    def mock(self, template: str, *params: str) -> Mock:
        name, _, _, system = TEMPLATES[template]
        command = [SYSTEM_PYTHON, "-m", "dbusmock", "--template", template]
        if system:
            command.insert(3, "--system")
        if params:
            command += ["--parameters", *params]
        process = subprocess.Popen(
            command, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        mock = Mock(process, template)
        self.mocks.append(mock)
        self._wait_for_name(name, process)
        return mock

    def _wait_for_name(self, name: str, process: subprocess.Popen[str]) -> None:
        deadline = time.monotonic() + 20
        while not _has_owner(name, self.address):
            if process.poll() is not None or time.monotonic() > deadline:
                err = process.stderr.read() if process.stderr else ""
                raise AssertionError(f"dbusmock did not take {name}: {err}")
            time.sleep(0.05)

    def stop_mock(self, mock: Mock) -> None:
        end(mock.process)
        self.mocks.remove(mock)

    def stop(self) -> None:
        for mock in list(self.mocks):
            self.stop_mock(mock)
        if self.daemon is not None:
            end(self.daemon)
            self.daemon = None
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def start_daemon() -> tuple[subprocess.Popen[str], str]:
    """A new `dbus-daemon --session` and its address (the GUI tests' desktop starts one too)."""
    daemon = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", "--print-address=1"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert daemon.stdout is not None
    return daemon, daemon.stdout.readline().strip()


def end(process: subprocess.Popen[Any]) -> None:
    """Stop a helper process, killing it if it does not stop, and close its pipes."""
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


def _has_owner(name: str, address: str) -> bool:
    # dbus-send, not dbus-fast: this runs in fixtures, where a test's event loop may already
    # be marked running (the Qt tests' qasync loop).
    done = subprocess.run(
        ["dbus-send", f"--bus={address}", "--print-reply", "--dest=org.freedesktop.DBus",
         "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner", f"string:{name}"],
        capture_output=True, text=True, check=False, timeout=10,
    )  # fmt: skip
    return done.returncode == 0 and "boolean true" in done.stdout


@contextmanager
def private_bus() -> Iterator[PrivateBus]:
    running = PrivateBus().start()
    try:
        yield running
    finally:
        running.stop()
