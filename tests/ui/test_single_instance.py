"""One window per data directory: a second start shows the running window, at its page, and
exits; a killed instance leaves nothing that stops the next start. (The real program started
twice is in `test_app_lifecycle.py`, beside its other run of the whole program.)"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tests.ui.conftest import Runner
from ui.single_instance import SingleInstance, socket_path

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def second_start(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`fieldsync-gui` started again on `data_dir`, as the launcher would."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "QT_QUICK_BACKEND": "software"}
    return subprocess.run(
        [sys.executable, "-m", "ui.main", "--data-dir", str(data_dir), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_a_second_start_shows_the_running_window_at_its_page_and_exits(
    run: Runner, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = SingleInstance(data_dir)
    assert first.acquire()
    asked: list[str] = []
    first.serve(asked.append)
    try:
        done = run(_in_thread(second_start, data_dir, "--open", "dead"), timeout=60)
    finally:
        first.release()
    assert (done.returncode, done.stderr.count("Traceback")) == (0, 0), done.stderr
    assert f"already running on {data_dir}; showed its window" in done.stdout
    assert asked == ["dead"]
    # The second start opened nothing of its own: no device database beside the lock.
    assert sorted(path.name for path in data_dir.iterdir()) == ["gui.lock"]


def test_a_holder_that_does_not_answer_gets_a_clear_refusal(run: Runner, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    stuck = SingleInstance(data_dir)
    assert stuck.acquire()  # holds the directory, never listens (hung while starting)
    try:
        assert not SingleInstance(data_dir).acquire()
        assert SingleInstance(data_dir).forward("", timeout=0.5) is False
        assert SingleInstance(data_dir).holder() == str(os.getpid())
    finally:
        stuck.release()
    after = SingleInstance(data_dir)
    assert after.acquire()  # released: the next start takes it
    after.release()


def test_a_killed_instance_leaves_nothing_that_stops_the_next_start(
    run: Runner, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()  # before the holder opens its lock file in it
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a+');"
         " fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
         str(data_dir / "gui.lock")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        assert not SingleInstance(data_dir).acquire()
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    Path(socket_path(data_dir)).write_text("left by the killed instance")
    again = SingleInstance(data_dir)
    assert again.acquire()
    asked: list[str] = []
    again.serve(asked.append)
    try:
        assert run(_in_thread(SingleInstance(data_dir).forward, "conflict:wo-1"), timeout=30)
    finally:
        again.release()
    assert asked == ["conflict:wo-1"]


async def _in_thread(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on a thread, so that the Qt loop (the running instance) answers meanwhile."""
    return await asyncio.to_thread(fn, *args)
