"""Child processes of the crash-safety test: claim and ack in a loop until drained or killed.

Run as ``crash_worker.py zygote``: the process imports the store once, then for every
``run DB_PATH LOG_PATH WORKER_ID CLOCK_OFFSET SEED`` line on stdin forks a fresh worker
process, prints ``ready PID`` from it, reaps it and prints ``exited PID STATUS``. Forking from
an imported parent makes each restart cost milliseconds instead of a Python start-up, so the
test can kill many workers quickly. The zygote never opens the database itself.

A worker's clock runs CLOCK_OFFSET seconds ahead of the wall clock, so every lease left by a
killed predecessor (run with a smaller offset) has already expired when it starts, while its
own leases (60 s) never expire during its short life. "acked job X" is appended to the log,
fsynced, only after ack returned True.
"""

from __future__ import annotations

import os
import random
import sys
import time
import traceback
from pathlib import Path

from app.store.db import open_database
from app.store.queue import JobQueue, QueueConfig


def work(db_path: str, log_path: str, worker_id: str, offset: str, seed: str) -> int:
    shift = float(offset)
    rng = random.Random(int(seed))
    db = open_database(Path(db_path))
    queue = JobQueue(
        db, Path(db_path), QueueConfig(lease_seconds=60.0), clock=lambda: time.time() + shift
    )
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    print(f"ready {os.getpid()}", flush=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        queue.reclaim_expired()
        jobs = queue.claim(worker_id, limit=rng.randint(1, 4))
        if not jobs:
            left = db.execute_sql("SELECT COUNT(*) FROM jobs WHERE status != 'done'").fetchone()
            if left[0] == 0:
                print(f"drained {os.getpid()}", flush=True)
                return 0
            time.sleep(0.005)
            continue
        for job in jobs:
            line = f"acked job {job.id}\n" if queue.ack(job) else f"ack refused {job.id}\n"
            os.write(log, line.encode())
            os.fsync(log)
    print(f"stuck {os.getpid()}", flush=True)
    return 3


def zygote() -> int:
    for line in sys.stdin:
        command, *args = line.split()
        if command != "run":
            return 2
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = work(*args)
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(f"exited {pid} {status}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(zygote())
