"""A pytest plugin that records the CPU seconds each test costs, to find what makes the suite slow.

`PYTHONPATH=. FIELDSYNC_CPU_PROFILE=<dir> pytest -p tests.support.cpu_profile` writes one JSON
line per test phase and per fixture setup to `<dir>/<worker>.jsonl`; `python -m
tests.support.cpu_profile <dir>` prints the top consumers. Wall times are useless on a shared
2-core machine, CPU seconds are not: a phase's cost is the worker's own CPU plus that of the
children it reaped meanwhile (a server process a fixture started counts when the fixture's
teardown reaps it) plus that of the test PostgreSQL clusters, which `pg_ctl` detaches, so
no `getrusage` sees them (read from `/proc` for the clusters of this process).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

_TICK = os.sysconf("SC_CLK_TCK")
_out: IO[str] | None = None


def _postgres_cpu() -> float:
    """CPU seconds of this process's PostgreSQL clusters, their exited backends included."""
    from tests.support import postgres

    total = 0.0
    for pid in postgres.running_postmasters():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # utime, stime, cutime, cstime are fields 14-17; fields[0] here is field 3.
        total += sum(int(value) for value in fields[11:15]) / _TICK
        for child in _children(pid):
            try:
                stat = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            total += (int(stat[11]) + int(stat[12])) / _TICK
    return total


def _children(pid: int) -> Iterator[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return
    for child in text.split():
        yield int(child)


def _cpu() -> tuple[float, float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (
        own.ru_utime + own.ru_stime,
        kids.ru_utime + kids.ru_stime,
        _postgres_cpu(),
    )


def _record(**fields: Any) -> None:
    if _out is not None:
        _out.write(json.dumps(fields) + "\n")
        _out.flush()


class _Meter:
    def __init__(self) -> None:
        self.wall = time.monotonic()
        self.cpu = _cpu()

    def done(self, **fields: Any) -> None:
        own, kids, pg = (after - before for after, before in zip(_cpu(), self.cpu, strict=True))
        _record(own=own, kids=kids, pg=pg, wall=time.monotonic() - self.wall, **fields)


def pytest_configure(config: pytest.Config) -> None:
    global _out
    directory = os.environ.get("FIELDSYNC_CPU_PROFILE")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _out = (Path(directory) / f"{worker}.jsonl").open("a")  # noqa: SIM115


def pytest_unconfigure(config: pytest.Config) -> None:
    global _out
    if _out is not None:
        _out.close()
        _out = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    meter = _Meter()
    try:
        return (yield)
    finally:
        meter.done(test=item.nodeid, phase="setup")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    meter = _Meter()
    try:
        return (yield)
    finally:
        meter.done(test=item.nodeid, phase="call")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    meter = _Meter()
    try:
        return (yield)
    finally:
        meter.done(test=item.nodeid, phase="teardown")


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Generator[None, Any, Any]:
    meter = _Meter()
    try:
        return (yield)
    finally:
        where = fixturedef.baseid or "<plugin>"
        meter.done(fixture=f"{where}::{fixturedef.argname}", scope=fixturedef.scope)


def _report(directory: Path, top: int = 40) -> None:
    tests: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    fixtures: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    files: dict[str, float] = defaultdict(float)
    grand = [0.0, 0.0, 0.0, 0.0]
    for path in directory.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            cost = row["own"] + row["kids"] + row["pg"]
            if "test" in row:
                entry = tests[row["test"]]
                entry[row["phase"]] += cost
                entry["total"] += cost
                entry["wall"] += row["wall"]
                files[row["test"].split("::")[0]] += cost
                grand[0] += row["own"]
                grand[1] += row["kids"]
                grand[2] += row["pg"]
                grand[3] += row["wall"]
            else:
                fixtures[row["fixture"]][0] += cost
                fixtures[row["fixture"]][1] += 1
                fixtures[row["fixture"]][2] += row["wall"]
    print(
        f"{len(tests)} tests: own {grand[0]:.1f} s + children {grand[1]:.1f} s + "
        f"postgres {grand[2]:.1f} s = {sum(grand[:3]):.1f} s CPU ({grand[3]:.1f} s wall)"
    )
    print(f"\ntop {top} tests by CPU (setup/call/teardown):")
    ranked = sorted(tests.items(), key=lambda kv: -kv[1]["total"])
    for name, entry in ranked[:top]:
        print(
            f"{entry['total']:7.2f} {entry['setup']:6.2f} {entry['call']:6.2f} "
            f"{entry['teardown']:6.2f}  {name}"
        )
    print(f"\ntop {top} files by CPU:")
    for name, cost in sorted(files.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{cost:7.2f}  {name}")
    print(f"\ntop {top} fixtures by setup CPU (total, count, wall):")
    for name, (cost, count, wall) in sorted(fixtures.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{cost:7.2f} {int(count):5d} {wall:7.2f}  {name}")


if __name__ == "__main__":
    _report(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 40)
