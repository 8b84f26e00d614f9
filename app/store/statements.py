"""The queue's hot-path SQL, written out once (peewee's query building costs several times the
statement itself; SQLite caches each prepared statement by its text).

Statements that look open jobs up by work order spell ``finished_at IS NULL``, the condition
of the partial index ``jobs_entity_open``: spelled any other way, SQLite scans every job kept.
"""

from __future__ import annotations

__all__ = [
    "ACK_MANY",
    "CLAIM",
    "CLAIM_COLUMNS",
    "INSERT_ATTEMPT",
    "INSERT_FIRST_JOB",
    "INSERT_JOB",
    "INSERT_WAITING_JOB",
    "WAITS_FOR_CREATE",
    "WAITS_FOR_HELD_CREATE",
]

CLAIM_COLUMNS = (
    "id, topic, payload, payload_version, idempotency_key, entity_key, base_version, "
    "priority, attempt_count, correlation_id, created_at, locked_until"
)

# One statement decides ``chained`` and inserts, so it is atomic on its own: inside the caller's
# transaction it needs no savepoint, outside one it needs no BEGIN/COMMIT pair.
INSERT_JOB = """
INSERT INTO jobs (topic, payload, payload_version, idempotency_key, entity_key, base_version,
                  chained, priority, status, attempt_count, next_attempt_at, correlation_id,
                  created_at, updated_at)
SELECT ?1, ?2, ?3, ?4, ?5, CASE WHEN prior.chained THEN NULL ELSE ?6 END, prior.chained,
       ?7, 'pending', 0, ?8, ?9, ?8, ?8
FROM (SELECT EXISTS (
          SELECT 1 FROM jobs WHERE entity_key = ?5 AND finished_at IS NULL) AS chained) AS prior
"""

# A job for a work order created just now (its id was generated in the same transaction) has
# no earlier job to wait for: no lookup of outstanding jobs.
INSERT_FIRST_JOB = """
INSERT INTO jobs (topic, payload, payload_version, idempotency_key, entity_key, base_version,
                  chained, priority, status, attempt_count, next_attempt_at, correlation_id,
                  created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, 'pending', 0, ?8, ?9, ?8, ?8)
"""

# A job that waits for another entity's create (an attachment's upload or removal, which
# needs its work order on the server): INSERT_JOB with ``waits_for`` (?10, migration 7).
INSERT_WAITING_JOB = """
INSERT INTO jobs (topic, payload, payload_version, idempotency_key, entity_key, base_version,
                  chained, priority, status, attempt_count, next_attempt_at, correlation_id,
                  created_at, updated_at, waits_for)
SELECT ?1, ?2, ?3, ?4, ?5, CASE WHEN prior.chained THEN NULL ELSE ?6 END, prior.chained,
       ?7, 'pending', 0, ?8, ?9, ?8, ?8, ?10
FROM (SELECT EXISTS (
          SELECT 1 FROM jobs WHERE entity_key = ?5 AND finished_at IS NULL) AS chained) AS prior
"""

# A job that waits for another entity (an attachment's upload for its work order, migration 7)
# is held while that entity's create is still open: the server would not know the work order.
# Only the create: an edit of the work order, queued or failed, never holds an upload back.
# ``{also}`` narrows which open creates hold it (by status).
_WAITS_FOR = (
    "EXISTS (SELECT 1 FROM jobs AS c WHERE c.entity_key = j.waits_for AND c.id < j.id "
    "AND c.finished_at IS NULL AND json_extract(c.payload, '$.op') = 'create'{also})"
)
WAITS_FOR_CREATE = _WAITS_FOR.format(also="")
WAITS_FOR_HELD_CREATE = _WAITS_FOR.format(also=" AND c.status IN ('conflict', 'dead')")

# Each topic has its own consumer (the delivery pipeline, the uploader): a claim takes one.
CLAIM = f"""
UPDATE jobs SET status = 'leased', locked_by = ?, locked_until = ?,
       attempt_count = attempt_count + 1, updated_at = ?
WHERE id IN (
    SELECT j.id FROM jobs AS j
    WHERE j.status = 'pending' AND j.next_attempt_at <= ? AND j.topic = ?
      AND NOT EXISTS (
          SELECT 1 FROM jobs AS e
          WHERE e.entity_key = j.entity_key AND e.id < j.id AND e.finished_at IS NULL)
      AND (j.waits_for IS NULL OR NOT {WAITS_FOR_CREATE})
    ORDER BY j.priority DESC, j.id
    LIMIT ?)
RETURNING {CLAIM_COLUMNS}
"""

INSERT_ATTEMPT = (
    "INSERT INTO attempts (job_id, started_at, duration_ms, outcome, http_status, error, "
    "kind, reason_code) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


# Done from leased or pending (a lease that expired while the reply was on its way); the ids
# come as one JSON array.
ACK_MANY = (
    "UPDATE jobs SET status = 'done', locked_by = NULL, locked_until = NULL, last_error = NULL, "
    "updated_at = ?, finished_at = ? WHERE id IN (SELECT value FROM json_each(?)) "
    "AND status IN ('leased', 'pending') RETURNING id"
)

# A chained job gets its base version (the acknowledged version of the job before it, or what
# the give-up policy chose): one statement text, aimed at a job or at the entity's next one.
_REBASE = (
    "UPDATE jobs SET base_version = ?, chained = 0, updated_at = updated_at "
    "WHERE id = {target} AND chained = 1"
)
REBASE_JOB = _REBASE.format(target="?")
# Spelled as the partial index's condition (jobs_entity_open): `status != 'done'` would scan
# every later row, an O(n) step per ack and O(n^2) per drain.
REBASE_NEXT = _REBASE.format(
    target="(SELECT MIN(id) FROM jobs WHERE entity_key = ? AND id > ? AND finished_at IS NULL)"
)
