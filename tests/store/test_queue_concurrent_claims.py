"""Several processes claiming from one database at once: no job is ever handed out twice."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from store_support import HERE, REPO_ROOT, child_env, rows

from app.store.db import open_database
from app.store.queue import JobQueue

JOBS = 3000
CLAIMERS = 3
ENTITIES = 400


@pytest.mark.slow
def test_concurrent_claimers_never_share_a_job(tmp_path: Path) -> None:
    path = tmp_path / "fieldsync.sqlite3"
    db = open_database(path)
    queue = JobQueue(db, path)
    with db.atomic():
        ids = [
            queue.enqueue("work_orders", {"n": n}, f"wo-{n % ENTITIES}", priority=(n % 3) * 10)
            for n in range(JOBS)
        ]
    db.close()

    start = tmp_path / "start"
    outputs = [tmp_path / f"claimed-{n}.txt" for n in range(CLAIMERS)]
    children = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "concurrent_claimer.py"),
                str(path),
                f"worker-{n}",
                str(n),
                str(start),
                str(out),
            ],
            cwd=REPO_ROOT,
            env=child_env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, out in enumerate(outputs)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
        start.touch()
        for child in children:
            _, stderr = child.communicate(timeout=180)
            assert "locked" not in stderr.lower(), stderr
            assert child.returncode == 0, stderr
    finally:
        for child in children:  # one failed: do not leave the others spinning
            if child.poll() is None:
                child.kill()
            child.communicate(timeout=30)

    claims = [[int(line) for line in out.read_text().split()] for out in outputs]
    every_claim = Counter(job_id for claimed in claims for job_id in claimed)
    assert sorted(every_claim) == sorted(ids), "the claims together cover every job"
    assert [job_id for job_id, n in every_claim.items() if n > 1] == [], "claimed twice"
    assert all(claimed for claimed in claims), "each claimer got work: they really overlapped"

    assert rows(path, "SELECT status, COUNT(*) FROM jobs GROUP BY status") == [("done", JOBS)]
    assert rows(path, "SELECT MIN(attempt_count), MAX(attempt_count) FROM jobs") == [(1, 1)]
    assert rows(path, "SELECT COUNT(*) FROM attempts WHERE outcome = 'done'") == [(JOBS,)]
    # Per-entity order across processes: each entity's jobs were acked in the order made.
    finished = rows(
        path,
        "SELECT j.entity_key, a.id FROM jobs AS j JOIN attempts AS a ON a.job_id = j.id "
        "ORDER BY j.entity_key, j.id",
    )
    by_entity: dict[str, list[int]] = {}
    for entity, attempt_id in finished:
        by_entity.setdefault(entity, []).append(attempt_id)
    assert all(order == sorted(order) for order in by_entity.values())
