"""Devices under benchmark: the engine's settings, and the line protocol of a device process.

A benchmark runs each device it measures in a process of its own (so its memory can be read
from outside, and it never shares a GIL with the server or the bench). The child prints one
JSON object per line on stdout (`say("ready", ...)`), waits for a line on stdin when the
parent must act between two steps, and ends with `done` or `failed`; the parent reads them
with `DeviceChild.expect`.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.events import EventBus, SyncProgress  # noqa: E402
from app.store.store import Store  # noqa: E402
from app.sync.engine import SyncConfig, SyncEngine  # noqa: E402

__all__ = [
    "UNLIMITED_RATE",
    "DeviceChild",
    "TimedSync",
    "engine_config",
    "run_child",
    "say",
    "timed_sync",
]

#: The device's own request-rate limit protects a shared server; here it is not measured.
UNLIMITED_RATE = 1e6


def engine_config(server_url: str, **overrides: Any) -> SyncConfig:
    """The engine's defaults, minus its own rate limit and the reconnect jitter."""
    settings: dict[str, Any] = {
        "request_rate": UNLIMITED_RATE,
        "request_burst": UNLIMITED_RATE,
        "reconnect_jitter_s": 0,
        **overrides,
    }
    return SyncConfig(server_url=server_url, **settings)


@dataclass(frozen=True)
class TimedSync:
    total_s: float  # engine start to idle: what the person waits for
    pull_s: float  # first pull event to the idle after it
    received: int  # changes the pull brought (its last event's `done`)


async def timed_sync(store: Store, config: SyncConfig, token: str, timeout_s: float) -> TimedSync:
    """Run a new engine on ``store`` until it has pulled and gone idle, timed by its events."""
    events = EventBus()
    marks: dict[str, float] = {}
    received = [0]

    def on_event(event: object) -> None:
        if not isinstance(event, SyncProgress) or "idle" in marks:
            return
        if event.phase == "pull":
            marks.setdefault("pull", time.perf_counter())
            received[0] = event.done
        elif event.phase == "idle" and "pull" in marks:
            marks["idle"] = time.perf_counter()

    events.subscribe(on_event)
    engine = SyncEngine(store, config, events, token=lambda: token)
    started = time.perf_counter()
    idle = await engine.run_until_idle(timeout_s)
    finished = time.perf_counter()
    engine.executor.shutdown()
    if not idle or "idle" not in marks:
        raise RuntimeError(f"the engine did not pull and go idle within {timeout_s:.0f} s")
    return TimedSync(finished - started, marks["idle"] - marks["pull"], received[0])


def say(event: str, **fields: Any) -> None:
    """One protocol line on stdout."""
    print(json.dumps({"event": event, **fields}), flush=True)


def run_child(main: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run the child's coroutine; a failure is said (`failed`, with why) and exits 1, its
    traceback on stderr."""
    try:
        return asyncio.run(main())
    except Exception as error:
        traceback.print_exc()
        say("failed", error=f"{type(error).__name__}: {error}")
        return 1


class DeviceChild:
    """A child speaking the protocol: `expect(event)`, `send()`, `kill()`; its stderr goes to
    `stderr_path` and is quoted when it fails."""

    def __init__(self, command: list[str], stderr_path: Path, env: dict[str, str]) -> None:
        self.stderr_path = stderr_path
        with stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env,
                text=True,
            )  # fmt: skip

    @property
    def pid(self) -> int:
        return self.process.pid

    def expect(self, wanted: str) -> dict[str, Any]:
        """The next `wanted` message; raises when the child failed or exited first."""
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                message: dict[str, Any] = json.loads(line)
            except json.JSONDecodeError:
                continue
            if message.get("event") == "failed":
                raise RuntimeError(f"device failed: {message['error']}\n{self.stderr()}")
            if message.get("event") == wanted:
                return message
        code = self.process.wait(10)
        raise RuntimeError(f"device exited {code} before {wanted!r}:\n{self.stderr()}")

    def send(self, line: str = "go") -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-3000:]

    def close(self) -> None:
        """Kill it if it still runs, reap it, close the pipes."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
