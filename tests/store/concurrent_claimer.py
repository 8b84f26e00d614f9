"""Child process of the concurrent-claims test: claim and ack until the queue is drained.

Usage: concurrent_claimer.py DB_PATH WORKER_ID SEED START_FILE OUT_FILE

Waits for START_FILE so every claimer starts together, then records every job id it was
handed, in order, to OUT_FILE as one id per line. Between claim and ack it waits a moment,
as a real worker waits for the server. Any exception (a "database is locked"
included) ends the process non-zero with the traceback on stderr.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

from app.store.db import open_database
from app.store.queue import JobQueue, Outcome


def main() -> int:
    db_path, worker_id, seed, start_file, out_file = sys.argv[1:6]
    rng = random.Random(int(seed))
    db = open_database(Path(db_path))
    queue = JobQueue(db, Path(db_path))
    claimed: list[int] = []
    print("ready", flush=True)
    while not Path(start_file).exists():
        time.sleep(0.005)
    deadline = time.monotonic() + 150
    while True:
        if time.monotonic() > deadline:
            print("gave up: jobs left that nobody finished", file=sys.stderr)
            return 3
        jobs = queue.claim(worker_id, limit=rng.randint(1, 12))
        if not jobs:
            left = db.execute_sql("SELECT COUNT(*) FROM jobs WHERE status != 'done'").fetchone()
            if left[0] == 0:
                break
            time.sleep(0.002)
            continue
        claimed.extend(job.id for job in jobs)
        time.sleep(rng.uniform(0.0, 0.002))  # the request to the server
        if rng.random() < 0.5:
            assert queue.ack_many([(job, Outcome(), None) for job in jobs]) == len(jobs)
        else:
            for job in jobs:
                assert queue.ack(job)
    Path(out_file).write_text("".join(f"{job_id}\n" for job_id in claimed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
