"""Where the CPU of a timed window went: seconds per process group, the machine's busy cores,
and what PostgreSQL's client backends were waiting on.

    window = CpuWindow({"server": lambda: tree(server_pid), "postgresql": lambda: tree(pm)})
    window.start(); ...; figures = window.stop()   # {"server_cpu_s": …, "machine_busy_cores": …}

    with PostgresWaits(db_url) as waits: ...        # waits.summary(): samples per wait type

CPU is read from /proc (utime + stime of each process of a group, at the start and the end of
the window; a process born inside the window counts from zero, one that exits inside it is
lost, so groups are read before their processes are stopped). The machine's busy cores come
from /proc/stat and include every other program on the machine: on a shared box they tell
whether there was a core left for a second server process.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg2

__all__ = ["CpuWindow", "PostgresWaits", "postmaster_pid", "statement_shape", "tree"]

_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def tree(pid: int) -> set[int]:
    """`pid` and every live process under it, read from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                fields = _stat_fields(int(entry.name))
                if fields[0] != "Z":
                    parents[int(entry.name)] = int(fields[1])
    found, frontier = {pid}, {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def postmaster_pid(data_dir: Path) -> int:
    """The PostgreSQL server's process (first line of `postmaster.pid`)."""
    return int((data_dir / "postmaster.pid").read_text().splitlines()[0])


def _cpu_seconds(pids: set[int]) -> dict[int, float]:
    seconds = {}
    for pid in pids:
        with contextlib.suppress(OSError, IndexError):
            fields = _stat_fields(pid)
            seconds[pid] = (int(fields[11]) + int(fields[12])) / _TICKS
    return seconds


def _machine_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


class CpuWindow:
    """CPU seconds of each named group of processes between `start()` and `stop()`."""

    def __init__(self, groups: dict[str, Callable[[], set[int]]]) -> None:
        self._groups = groups
        self._before: dict[str, dict[int, float]] = {}
        self._machine = (0, 0)
        self._started = 0.0

    def start(self) -> None:
        self._before = {name: _cpu_seconds(pids()) for name, pids in self._groups.items()}
        self._machine = _machine_jiffies()
        self._started = time.monotonic()

    def stop(self) -> dict[str, float]:
        window_s = time.monotonic() - self._started
        busy, total = _machine_jiffies()
        figures: dict[str, float] = {}
        for name, pids in self._groups.items():
            before = self._before[name]
            after = _cpu_seconds(pids())
            used = sum(after[pid] - before.get(pid, 0.0) for pid in after)
            figures[f"{name}_cpu_s"] = round(used, 2)
        cores = os.cpu_count() or 1
        busy_share = (busy - self._machine[0]) / max(total - self._machine[1], 1)
        figures["machine_busy_cores"] = round(busy_share * cores, 2)
        figures["machine_cores"] = cores
        figures["window_s"] = round(window_s, 3)
        return figures


class PostgresWaits:
    """Samples the client backends of one database every `interval` seconds: how often an
    active backend was waiting, and on what (`Lock` is a heavyweight lock: a row, a
    transaction, a table or its extension; `LWLock` an internal one, `IO` the disk, `Client`
    the server process's next command). For `Lock` waits it also counts the statement that
    waited (literals blanked), so a lock queue names its query."""

    def __init__(self, db_url: str, interval: float = 0.02) -> None:
        self._db_url = db_url
        self._interval = interval
        self._stop = threading.Event()
        self._samples: Counter[str] = Counter()
        self._locks: Counter[str] = Counter()
        self._thread = threading.Thread(target=self._run, name="pg-waits", daemon=True)

    def _run(self) -> None:
        connection = psycopg2.connect(self._db_url)
        connection.autocommit = True
        try:
            with connection.cursor() as cursor:
                while not self._stop.wait(self._interval):
                    cursor.execute(
                        "SELECT state, wait_event_type, wait_event, left(query, 400) "
                        "FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                        "AND backend_type = 'client backend'"
                    )
                    for state, wait_type, wait_event, query in cursor.fetchall():
                        if state == "active":
                            self._samples["active"] += 1
                            self._samples[f"{wait_type}:{wait_event}" if wait_type else "cpu"] += 1
                            if wait_type == "Lock":
                                self._locks[f"{wait_event}: {statement_shape(query)}"] += 1
                        elif state == "idle in transaction":
                            self._samples["idle_in_transaction"] += 1
                    self._samples["ticks"] += 1
        finally:
            connection.close()

    def __enter__(self) -> PostgresWaits:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def summary(self) -> dict[str, Any]:
        """Samples taken, active-backend samples, the share of those in each wait, the share
        waiting on a heavyweight lock, and the statements that waited on one most."""
        active = self._samples["active"]
        shares = {
            name: round(count / active, 3)
            for name, count in self._samples.most_common()
            if name not in ("active", "ticks", "idle_in_transaction") and active
        }
        locked = sum(count for name, count in self._samples.items() if name.startswith("Lock:"))
        return {
            "samples": self._samples["ticks"],
            "active_backends_mean": round(active / max(self._samples["ticks"], 1), 2),
            "idle_in_transaction_mean": round(
                self._samples["idle_in_transaction"] / max(self._samples["ticks"], 1), 2
            ),
            "active_share_by_wait": shares,
            "lock_wait_share": round(locked / active, 4) if active else 0.0,
            "lock_waits_by_statement": {
                name: round(count / active, 4) for name, count in self._locks.most_common(5)
            },
        }


def statement_shape(query: str | None) -> str:
    """A statement with its literals blanked and its whitespace squeezed, cut to 160 characters:
    the same statement from every backend counts as one."""
    text = _LITERALS.sub("?", query or "")
    return " ".join(text.split())[:160]


# Quoted strings, then numbers not part of a name: what the driver inlined for parameters.
_LITERALS = re.compile(r"'(?:[^']|'')*'|(?<![\w\"])-?\d+(?:\.\d+)?")
