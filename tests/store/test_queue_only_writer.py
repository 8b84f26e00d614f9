"""The queue is the only writer of the jobs, attempts, conflicts and audit_log tables."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The queue's own modules, and the migrations that reshape its tables.
WRITERS = {
    "app/store/queue.py",
    "app/store/holds.py",
    "app/store/queue_sweeps.py",
    "app/store/statements.py",
    "app/store/migrations.py",
}
WRITE = re.compile(
    r"\b(UPDATE|INSERT(\s+OR\s+\w+)?\s+INTO|DELETE\s+FROM)\s+(jobs|attempts|conflicts|audit_log)\b",
    re.IGNORECASE,
)


def test_no_module_outside_the_queue_writes_its_tables() -> None:
    offenders = []
    for package in ("app", "ui"):  # the server has its own database
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name in WRITERS:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if WRITE.search(line):
                    offenders.append(f"{name}:{number}: {line.strip()}")
    assert offenders == []


def test_the_check_sees_a_write() -> None:
    assert WRITE.search('"UPDATE jobs SET status = ?"')
    assert WRITE.search("INSERT OR REPLACE INTO conflicts (job_id)")
    assert not WRITE.search("SELECT * FROM jobs")
