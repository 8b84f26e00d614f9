"""A private desktop for end-to-end GUI tests: Xvfb, a D-Bus session, the AT-SPI bus, and
the installed `fieldsync-gui` driven through its accessibility tree only.

Nothing here touches the machine's own display or session bus: each `Desktop` starts its own
X server (`-displayfd`, a free display number) and `dbus-daemon --session`, and launches
the accessibility bus on it before the app starts, so Qt exports its tree there.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.dbus import end, start_daemon

AGENT = Path(__file__).with_name("atspi_agent.py")
SYSTEM_PYTHON = "/usr/bin/python3"
BUS_LAUNCHER = "/usr/libexec/at-spi-bus-launcher"


@functools.cache  # asked by every module that uses it, at collection: probe once
def missing_tools() -> str:
    """Why this machine cannot run the GUI tests ("" when it can)."""
    if shutil.which("Xvfb") is None:
        return "Xvfb is not installed (scripts/system-deps.sh installs xvfb)"
    if shutil.which("dbus-daemon") is None:
        return "dbus-daemon is not installed"
    if not Path(BUS_LAUNCHER).exists():
        return "at-spi2-core is not installed"
    probe = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import pyatspi"], capture_output=True, check=False, timeout=30
    )
    if probe.returncode != 0:
        return "python3-pyatspi is not installed"
    return ""


def gui_marks() -> list[pytest.MarkDecorator]:
    """A GUI test's marks: slow, and skipped (with the reason) where the tools are missing."""
    why = missing_tools()
    return [pytest.mark.slow, pytest.mark.skipif(bool(why), reason=why or "ok")]


class Desktop:
    """Xvfb + a session bus + the accessibility bus, stopped in reverse order."""

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen[Any]] = []
        self.env: dict[str, str] = {}

    def start(self) -> Desktop:
        read_fd, write_fd = os.pipe()
        xvfb = subprocess.Popen(
            ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "1280x1024x24",
             "-nolisten", "tcp"],
            pass_fds=[write_fd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(write_fd)
        self.processes.append(xvfb)
        with os.fdopen(read_fd) as displays:
            display = ":" + displays.readline().strip()
        bus, address = start_daemon()
        self.processes.append(bus)
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("QT_", "FIELDSYNC_"))},
            "DISPLAY": display,
            "DBUS_SESSION_BUS_ADDRESS": address,
            "QT_QPA_PLATFORM": "xcb",
            "QT_QUICK_BACKEND": "software",
            "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1",
            "QT_ACCESSIBILITY": "1",
            "NO_AT_BRIDGE": "0",
            "PYTHONUNBUFFERED": "1",
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
        }
        self.processes.append(
            subprocess.Popen(
                [BUS_LAUNCHER, "--launch-immediately"],
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )  # fmt: skip
        )
        time.sleep(1.0)  # the bus launcher registers org.a11y.Bus before the app asks for it
        return self

    def stop(self) -> None:
        for process in reversed(self.processes):
            end(process)
        self.processes = []


class Gui:
    """The installed `fieldsync-gui` as a subprocess; its log kept for failure messages."""

    def __init__(self, desktop: Desktop, log_path: Path, *args: str, token: str) -> None:
        script = Path(sys.executable).parent / "fieldsync-gui"
        command = [str(script)] if script.exists() else [sys.executable, "-m", "ui.main"]
        self.log_path = log_path
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [*command, *args], env={**desktop.env, "FIELDSYNC_TOKEN": token},
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip

    @classmethod
    def phone(cls, desktop: Desktop, tmp_path: Path, server_url: str, token: str) -> Gui:
        """The app at a phone's size (360x720) syncing with `server_url`; its data in
        `tmp_path/phone`, its log in `tmp_path/gui.log`."""
        return cls(
            desktop, tmp_path / "gui.log",
            "--data-dir", str(tmp_path / "phone"), "--server", server_url, "--size", "360x720",
            token=token,
        )  # fmt: skip

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_running(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while "fieldsync-gui running" not in self.log():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"fieldsync-gui did not start:\n{self.log()[-3000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


class Screen:
    """What the app exposes over AT-SPI, through `atspi_agent.py` run by the system Python."""

    def __init__(self, desktop: Desktop, gui: Gui) -> None:
        self.gui = gui
        self.agent = subprocess.Popen(
            [SYSTEM_PYTHON, str(AGENT), "Fieldsync"], env=desktop.env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def ask(self, **request: Any) -> dict[str, Any]:
        assert self.agent.stdin is not None
        assert self.agent.stdout is not None
        self.agent.stdin.write(json.dumps(request) + "\n")
        self.agent.stdin.flush()
        answer: dict[str, Any] = json.loads(self.agent.stdout.readline())
        return answer

    def names(self) -> list[str]:
        answer = self.ask(op="texts")
        if not answer["ok"]:
            return []
        return [t.get("text", t["name"]) for t in answer["texts"]]

    def wait(self, what: str | re.Pattern[str], timeout: float = 30.0) -> str:
        """Until a showing node's name matches `what` (a substring, or a pattern); it."""
        found: list[str] = []

        def seen() -> bool:
            for name in self.names():
                hit = what.search(name) if isinstance(what, re.Pattern) else what in name
                if hit:
                    found.append(name)
                    return True
            return False

        self.until(seen, timeout, f"{what!r} on screen")
        return found[0]

    def until(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                shown = self.names()
                raise AssertionError(
                    f"no {what} after {timeout} s; showing: {shown}\n"
                    f"app log:\n{self.gui.log()[-2000:]}"
                )
            time.sleep(0.1)

    def click(
        self,
        name: str,
        role: str | None = "push button",
        *,
        prefix: bool = False,
        pointer: bool = False,
        timeout: float = 15.0,
    ) -> None:
        self._act(timeout, op="click", name=name, role=role, prefix=prefix, pointer=pointer)

    def reveal(self, name: str, timeout: float = 30.0) -> None:
        """Turn the mouse wheel over the window until a node called `name` is on screen (a
        phone's page is taller than the screen; AT-SPI shows only what is in view)."""

        def shown() -> bool:
            if name in self.names():
                return True
            self.ask(op="scroll", name="", role="frame", prefix=True, clicks=5)
            return False

        self.until(shown, timeout, f"{name!r} scrolled into view")

    def type_text(self, name: str, text: str, timeout: float = 15.0) -> None:
        """Focus the field named `name` and type `text` (into what it holds)."""
        self._act(timeout, op="type", name=name, text=text, role=None)
        self.until(lambda: any(text in shown for shown in self.names()), timeout, f"{text!r} typed")

    def _act(self, timeout: float, **request: Any) -> None:
        errors: list[str] = []

        def done() -> bool:
            answer = self.ask(**request)
            if not answer["ok"]:
                errors.append(answer["error"])
            return bool(answer["ok"])

        self.until(done, timeout, f"{request} possible ({errors[-1:] or ''})")

    def close(self) -> None:
        if self.agent.stdin is not None:
            self.agent.stdin.close()
        self.agent.wait(10)
        if self.agent.stdout is not None:
            self.agent.stdout.close()
