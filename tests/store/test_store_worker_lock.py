"""One delivery worker per data dir; a second gets a clear message, readers carry on."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from store_support import REPO_ROOT, child_env

from app.store.errors import WorkerLockHeldError
from app.store.lock import WorkerLock
from app.store.store import Store

# A worker: takes the lock, writes an edit while holding it, then waits to be killed.
WORKER = """
import sys, time
from pathlib import Path
from app.store.lock import WorkerLock
from app.store.store import Store
data_dir = Path(sys.argv[1])
lock = WorkerLock(data_dir)
lock.acquire()
store = Store(data_dir)
result = store.record_edit("create", None, {"title": "Written by the worker"})
print(result.entity_id, flush=True)
time.sleep(300)
"""


def test_second_worker_is_refused_until_the_first_dies(data_dir: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(data_dir)],
        cwd=REPO_ROOT,
        env=child_env(data_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        entity_id = child.stdout.readline().strip()
        assert entity_id, child.stderr.read() if child.stderr else ""

        second = WorkerLock(data_dir)
        with pytest.raises(WorkerLockHeldError) as caught:
            second.acquire()
        assert f"pid {child.pid}" in str(caught.value)
        assert str(data_dir) in str(caught.value)
        assert not second.held

        # Read-only commands work alongside the running worker.
        with Store(data_dir) as reader:
            assert reader.cache.get(entity_id) is not None
            assert reader.stats()["queue_depth"]["pending"] == 1
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=30)

    # The kernel released the lock with the process: no stale lock file blocks us.
    with WorkerLock(data_dir) as lock:
        assert lock.held
        with pytest.raises(WorkerLockHeldError, match="pid"):
            WorkerLock(data_dir).acquire()
    assert not lock.held
    with WorkerLock(data_dir):
        pass
