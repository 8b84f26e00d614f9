"""Crash safety: a worker claiming and acking in a loop is SIGKILLed at random points, many times.

Afterwards no job is lost (all done once the killed workers' leases are reclaimed), none is
done twice (one 'done' attempt each, at most one "acked" log line each, a second ack refused)
and every lease the killed workers held was recovered and counted as a lease timeout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from store_support import HERE, REPO_ROOT, child_env, rows

from app.store.db import open_database
from app.store.queue import JobQueue, Outcome

LOW_WATER = 400
BATCH = 600
KILLS = 40
ENTITIES = 60
SEED = 20240611


def top_up(path: Path, ids: list[int], rng: random.Random) -> None:
    """Keep work in the queue so every generation has something to be killed in the middle
    of, whatever the machine's speed, without a long drain at the end."""
    left = rows(path, "SELECT COUNT(*) FROM jobs WHERE status != 'done'")[0][0]
    if left >= LOW_WATER:
        return
    db = open_database(path)
    queue = JobQueue(db, path)
    with db.atomic():
        for _ in range(BATCH):
            n = len(ids)
            ids.append(
                queue.enqueue(
                    "work_orders",
                    {"op": "update", "fields": {"notes": f"edit {n}"}},
                    f"wo-{n % ENTITIES}",
                    priority=rng.choice([0, 10, 100]),
                )
            )
    db.close()


class Zygote:
    """The pre-imported parent that forks each worker generation (see crash_worker.py)."""

    def __init__(self, path: Path, log: Path) -> None:
        self.path = path
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "crash_worker.py")],
            cwd=REPO_ROOT,
            env=child_env(path.parent),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def start(self, generation: int) -> int:
        """Fork a worker; return its pid once it has opened the database."""
        assert self.process.stdin is not None
        # Each generation lives 1000 s after the last: its predecessors' leases are over.
        self.process.stdin.write(
            f"run {self.path} {self.log} worker-{generation} {generation * 1000.0} "
            f"{SEED + generation}\n"
        )
        self.process.stdin.flush()
        word, pid = self.line().split()
        assert word == "ready", self.fail()
        return int(pid)

    def wait(self, pid: int) -> tuple[list[str], int]:
        """Lines the worker printed, and its wait status once reaped."""
        said = []
        while True:
            line = self.line()
            if line.startswith(f"exited {pid} "):
                return said, int(line.split()[2])
            said.append(line)

    def line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, self.fail()
        return line.strip()

    def fail(self) -> str:
        self.close()
        return self.process.stderr.read() if self.process.stderr else ""

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None and not stream.closed:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()


@pytest.mark.slow
def test_sigkilled_workers_lose_nothing_and_finish_nothing_twice(tmp_path: Path) -> None:
    path = tmp_path / "fieldsync.sqlite3"
    log = tmp_path / "acked.log"
    rng = random.Random(SEED)
    ids: list[int] = []
    open_database(path).close()

    kills = 0
    kills_holding_leases = 0
    # (job id, locked_until): a victim's lease may outlive the next victim too, if that one
    # died before its first reclaim; it is still one lease to recover.
    leases_left_by_kills: set[tuple[int, float]] = set()
    zygote = Zygote(path, log)
    try:
        for generation in range(KILLS):
            top_up(path, ids, rng)
            pid = zygote.start(generation)
            time.sleep(rng.uniform(0.0, 0.04))
            os.kill(pid, signal.SIGKILL)
            said, status = zygote.wait(pid)
            assert os.WIFSIGNALED(status), (said, "drained before the kill: raise BATCH")
            kills += 1
            held = rows(
                path, "SELECT id, locked_until, locked_by FROM jobs WHERE status = 'leased'"
            )
            leases_left_by_kills.update((job_id, until) for job_id, until, _ in held)
            kills_holding_leases += any(by == f"worker-{generation}" for _, _, by in held)

        # A last worker, never killed, reclaims what the last victim held and drains the rest.
        pid = zygote.start(KILLS + 1)
        said, status = zygote.wait(pid)
        assert said == [f"drained {pid}"], zygote.fail()
        assert os.WIFEXITED(status)
        assert os.WEXITSTATUS(status) == 0
    finally:
        zygote.close()

    assert kills == KILLS
    assert kills_holding_leases >= 5, "too few kills landed while a lease was held"

    # No job lost: every job is done.
    statuses = dict(rows(path, "SELECT status, COUNT(*) FROM jobs GROUP BY status"))
    assert statuses == {"done": len(ids)}

    # None done twice: exactly one 'done' attempt per job, and no id logged twice.
    done_attempts = Counter(
        job_id for (job_id,) in rows(path, "SELECT job_id FROM attempts WHERE outcome = 'done'")
    )
    assert set(done_attempts) == set(ids)
    assert set(done_attempts.values()) == {1}
    logged = log.read_text().splitlines()
    assert not [line for line in logged if not line.startswith("acked job ")]
    logged_ids = Counter(int(line.rsplit(" ", 1)[1]) for line in logged)
    assert max(logged_ids.values()) == 1
    assert set(logged_ids) <= set(ids)
    # A kill between ack's commit and the log write loses only the log line, never the job.
    assert len(logged_ids) >= len(ids) - kills

    # Every lease a killed worker held came back, and was counted once as a lease timeout.
    counters = dict(rows(path, "SELECT name, value FROM counters"))
    assert counters.get("lease_timeouts", 0) == len(leases_left_by_kills)
    expired = dict(
        rows(
            path,
            "SELECT job_id, COUNT(*) FROM attempts WHERE outcome = 'lease_expired' GROUP BY job_id",
        )
    )
    assert sum(expired.values()) == len(leases_left_by_kills)
    assert Counter(job_id for job_id, _ in leases_left_by_kills) == expired
    # Every claim is accounted for: the one that finished plus one per expired lease.
    for job_id, attempt_count in rows(path, "SELECT id, attempt_count FROM jobs"):
        assert attempt_count == 1 + expired.get(job_id, 0), job_id

    # Per-entity order held across crashes: each entity's jobs finished in the order made.
    finished = rows(
        path,
        "SELECT j.entity_key, j.id, a.id FROM jobs AS j JOIN attempts AS a "
        "ON a.job_id = j.id AND a.outcome = 'done' ORDER BY j.entity_key, j.id",
    )
    by_entity: dict[str, list[int]] = {}
    for entity, _, attempt_id in finished:
        by_entity.setdefault(entity, []).append(attempt_id)
    for entity, order in by_entity.items():
        assert order == sorted(order), entity


def test_second_ack_of_a_done_job_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "fieldsync.sqlite3"
    db = open_database(path)
    queue = JobQueue(db, path)
    queue.enqueue("work_orders", {"op": "create", "fields": {"title": "Pump"}}, "wo-1")
    [job] = queue.claim("worker-1")
    assert queue.ack(job, result_version=1)
    before = rows(path, "SELECT * FROM jobs"), rows(path, "SELECT * FROM attempts")

    assert not queue.ack(job, result_version=2)
    # A crashed worker's successor acking the same job from a stale claim: also refused.
    replayed = dataclasses.replace(job, claimed_at=job.claimed_at + 5, locked_until=0.0)
    assert queue.ack_many([(replayed, Outcome(), None)]) == 0
    assert (rows(path, "SELECT * FROM jobs"), rows(path, "SELECT * FROM attempts")) == before
    db.close()
