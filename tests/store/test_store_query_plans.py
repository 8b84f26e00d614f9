"""Every lookup of a work order's open jobs goes through jobs_entity_open, never a scan.

The index is partial (``WHERE finished_at IS NULL``): SQLite uses it only for a query that
spells the same condition. A query written another way (``status != 'done'``, a status list)
still returns the right rows, only by scanning every job ever kept: O(n) per call, O(n^2) per
drain on a phone holding a month of history. No other test would notice.
"""

from __future__ import annotations

import re

from app.store import deadletters, stats
from app.store.cache import has_outstanding
from app.store.db import connection
from app.store.queue import Outcome, entities_with_open_jobs
from app.store.store import Store

# A plan line that reads the jobs table (as jobs, j or e) without an index.
FULL_SCAN = re.compile(r"^SCAN (jobs|j|e)\b(?!.*USING)")
LOOKUP = re.compile(r"entity_key (=|IN)|jobs_entity_open")


def test_open_job_lookups_use_the_partial_index(store: Store) -> None:
    conn = connection(store.db)
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        first = store.record_edit("create", None, {"title": "Pump seal"}).entity_id
        store.record_edit("update", first, {"site": "North yard"})  # chained behind the create
        second = store.record_edit("create", None, {"title": "Valve"}).entity_id
        jobs = {job.entity_key: job for job in store.queue.claim("worker-1", 10)}
        assert set(jobs) == {first, second}, "the chained update waits for its create"
        store.queue.ack(jobs[first], result_version=1)  # rebases the chained update
        store.queue.dead(jobs[second], Outcome(error="HTTP 422"))
        store.queue.next_attempt_at()
        store.queue.in_flight()
        store.cache.query()
        stats.outstanding_depth(store)
        deadletters.job_states(store, [first, second])
        assert has_outstanding(conn, second)
        assert entities_with_open_jobs(conn, [first, second]) == {first, second}
    finally:
        conn.set_trace_callback(None)

    # Every statement that looks jobs up by work order, however it is spelled.
    lookups = sorted({sql for sql in seen if "jobs" in sql and LOOKUP.search(sql)})
    assert len(lookups) >= 12, lookups  # every call above made one; none was skipped
    for sql in lookups:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
        assert not [line for line in plan if FULL_SCAN.match(line)], (sql, plan)
        assert any("jobs_entity_open" in line for line in plan), (sql, plan)
