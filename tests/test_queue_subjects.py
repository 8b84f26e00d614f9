"""The queue benchmark's systems still do what they are timed doing (nothing is timed here):
raw sqlite3 runs the store's own SQL on the store's schema, so a schema change that leaves the
benchmark behind fails here instead of in `make bench`."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from queue_subjects import make_subject, schema_ddl  # noqa: E402

SYSTEMS = ("fieldsync", "sqlite3", "persist_queue", "huey", "litequeue")


@pytest.fixture(scope="module")
def ddl() -> list[str]:
    return schema_ddl()


@pytest.mark.parametrize("name", SYSTEMS)
def test_every_operation_runs_and_leaves_nothing_claimable(
    tmp_path: Path, ddl: list[str], name: str
) -> None:
    subject = make_subject(name, tmp_path, ddl)
    try:
        for _ in range(2):
            subject.enqueue()
            subject.enqueue_job_only()
        for _ in range(2):
            subject.claim_ack()
            subject.claim_ack_full()
        pragmas = subject.pragmas()
        assert (pragmas["journal_mode"], pragmas["synchronous"]) == ("wal", "FULL")
    finally:
        subject.close()
    if name in ("fieldsync", "sqlite3"):
        with sqlite3.connect(subject.database()) as conn:
            statuses = conn.execute("SELECT status, COUNT(*) FROM jobs GROUP BY status")
            assert dict(statuses.fetchall()) == {"done": 4}
            outcomes = conn.execute("SELECT outcome, kind, reason_code FROM attempts")
            assert set(outcomes.fetchall()) == {("done", "success", "applied")}


@pytest.mark.parametrize("name", ["fieldsync", "sqlite3"])
def test_a_batch_drains_a_hundred_jobs_in_one_claim(
    tmp_path: Path, ddl: list[str], name: str
) -> None:
    subject = make_subject(name, tmp_path, ddl)
    try:
        subject.fill(150)
        assert subject.claim_ack_batch(100) == 100
        assert subject.claim_ack_batch(100) == 50
    finally:
        subject.close()
