"""Run `fieldsync-server serve` as a subprocess and wait on its JSON log lines."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["ServerProcess", "descendants", "server_command"]


def server_command() -> list[str]:
    """The installed console script next to our interpreter, else `python -m server.cli`."""
    script = Path(sys.executable).parent / "fieldsync-server"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "server.cli"]


def descendants(pid: int) -> set[int]:
    """Every live process under `pid` (children, theirs, ...), read from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] != "Z":
                    parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


class ServerProcess:
    """One `fieldsync-server serve --port 0` process; `base_url` once it logs `listening`."""

    def __init__(self, db_url: str, *extra_args: str) -> None:
        self.db_url = db_url
        self.extra_args = extra_args
        self.lines: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._process: subprocess.Popen[str] | None = None
        self._pump_thread: threading.Thread | None = None
        self.base_url = ""

    def start(self, timeout: float = 30.0) -> ServerProcess:
        command = [*server_command(), "serve", "--db", self.db_url, "--port", "0"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._process = subprocess.Popen(
            [*command, *self.extra_args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()
        entry = self.wait_for(lambda e: e.get("msg") == "listening", timeout)
        self.base_url = entry["url"]
        self.wait_for(lambda e: "startup complete" in e.get("msg", ""), timeout)
        return self

    @property
    def pid(self) -> int:
        """The `fieldsync-server serve` process (with `--workers`, their supervisor)."""
        assert self._process is not None, "start() first"
        return self._process.pid

    def _pump(self) -> None:
        assert self._process is not None
        assert self._process.stderr is not None
        try:
            for line in self._process.stderr:
                self.lines.append(line)
                self._lines.put(line)
        except ValueError:  # `stop` closed the pipe that a straggler still held open
            pass
        finally:
            self._lines.put(None)

    def wait_for(self, predicate: Any, timeout: float = 30.0) -> dict[str, Any]:
        """The first JSON log entry (from now on) matching `predicate`."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no matching log line; got:\n{''.join(self.lines[-20:])}")
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError(f"server exited; log:\n{''.join(self.lines[-40:])}")
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if predicate(entry):
                return dict(entry)

    def entries(self) -> list[dict[str, Any]]:
        parsed = []
        for line in list(self.lines):
            try:
                parsed.append(json.loads(line))
            except json.JSONDecodeError:
                parsed.append({"unparsed": line})
        return parsed

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=5)
        # The pipe ends when every process holding it has (workers outlive a killed
        # supervisor for a moment): read it to the end before closing it under the reader.
        if self._pump_thread is not None:
            self._pump_thread.join(timeout=10)
        if self._process.stderr is not None:
            self._process.stderr.close()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
