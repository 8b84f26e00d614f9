"""Peewee models of the local store: the schema, as migration 1 creates it.

Hot paths (enqueue, claim, ack) use prepared SQL in `queue.py` over these same tables: peewee's
query building costs several times the statement itself. Times are UNIX seconds (REAL) from
the device clock; nothing compares them with the server's clock.
"""

from __future__ import annotations

import peewee as pw

from app.states import JobStatus

JOB_STATUSES = tuple(JobStatus)
#: Statuses that hold back later jobs for the same entity (per-entity order).
BLOCKING_STATUSES = JobStatus.outstanding()


class BaseModel(pw.Model):
    class Meta:
        legacy_table_names = False


class SchemaVersion(BaseModel):
    """Which migrations ran (table ``schema_version``, peewee's name for the class)."""

    version = pw.IntegerField()
    applied_at = pw.FloatField()


class Job(BaseModel):
    """One mutation waiting to reach the server (the design rationale's `jobs` table)."""

    id = pw.AutoField()
    topic = pw.TextField()
    payload = pw.TextField()  # JSON
    payload_version = pw.IntegerField()
    idempotency_key = pw.TextField(unique=True)
    entity_key = pw.TextField()
    base_version = pw.IntegerField(null=True)
    # Enqueued while an earlier job for the same entity was outstanding: its base version is
    # whatever that job produces, filled in when it is acknowledged.
    chained = pw.BooleanField(default=False)
    priority = pw.IntegerField(default=0)
    status = pw.TextField(default=JobStatus.PENDING.value)
    attempt_count = pw.IntegerField(default=0)
    next_attempt_at = pw.FloatField()
    last_error = pw.TextField(null=True)
    locked_by = pw.TextField(null=True)
    locked_until = pw.FloatField(null=True)
    correlation_id = pw.TextField()
    created_at = pw.FloatField()
    updated_at = pw.FloatField()
    # When the job was done, and set only then: NULL while it is open (pending, leased, in
    # conflict or dead), so jobs_entity_open can key on it (migration 3).
    finished_at = pw.FloatField(null=True)

    class Meta:
        table_name = "jobs"
        constraints = [pw.SQL("CHECK (status IN ('pending','leased','done','dead','conflict'))")]


class Attempt(BaseModel):
    """One delivery attempt of a job, kept so a dead job can be explained; pruned with it."""

    id = pw.AutoField()
    job = pw.ForeignKeyField(Job, on_delete="CASCADE", backref="attempts")
    started_at = pw.FloatField()
    duration_ms = pw.FloatField(null=True)
    outcome = pw.TextField()  # an AttemptOutcome
    http_status = pw.IntegerField(null=True)
    error = pw.TextField(null=True)

    class Meta:
        table_name = "attempts"


class CachedWorkOrder(BaseModel):
    """The device's view of a work order: what the person sees, offline or not.

    The editable fields hold the local view (server state plus pending local edits);
    `server_snapshot` holds the last record the server sent, the base of three-way merges.
    """

    id = pw.TextField(primary_key=True)
    title = pw.TextField()
    site = pw.TextField(default="")
    status = pw.TextField(default="open")
    priority = pw.TextField(default="normal")
    notes = pw.TextField(default="")
    assignee = pw.TextField(default="")
    due_date = pw.TextField(null=True)
    deleted = pw.BooleanField(default=False)
    server_version = pw.IntegerField(null=True)
    etag = pw.TextField(null=True)
    server_snapshot = pw.TextField(null=True)  # JSON
    server_updated_at = pw.TextField(null=True)
    server_updated_by = pw.TextField(null=True)
    # server | local (never acknowledged yet). How many edits are pending is not stored: it
    # is counted from the queue (jobs_entity_open index), so it cannot drift after a crash.
    origin = pw.TextField(default="local")
    local_updated_at = pw.FloatField()
    last_synced_at = pw.FloatField(null=True)

    class Meta:
        table_name = "work_orders"


class Counter(BaseModel):
    """Monotonic counters that must survive restarts (lease timeouts, duplicates detected...)."""

    name = pw.TextField(primary_key=True)
    value = pw.IntegerField(default=0)

    class Meta:
        table_name = "counters"


class Setting(BaseModel):
    """Small persistent state: the changes-feed sync token, last successful sync..."""

    key = pw.TextField(primary_key=True)
    value = pw.TextField()

    class Meta:
        table_name = "settings"


class AuditEntry(BaseModel):
    """Decisions a person made that removed or replaced queued work (discard, resolve)."""

    id = pw.AutoField()
    at = pw.FloatField()
    action = pw.TextField()
    job_id = pw.IntegerField(null=True)
    entity_key = pw.TextField(null=True)
    detail = pw.TextField()  # JSON

    class Meta:
        table_name = "audit_log"


SCHEMA_V1 = [SchemaVersion, Job, Attempt, CachedWorkOrder, Counter, Setting, AuditEntry]

INDEXES_V1 = [
    # Ready claims: pending jobs by priority then age; old done rows never enter this index.
    "CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (priority DESC, id) WHERE status = 'pending'",
    # Per-entity order: is an earlier job for this entity still outstanding?
    "CREATE INDEX IF NOT EXISTS jobs_entity_open ON jobs (entity_key, id) "
    "WHERE status IN ('pending','leased','conflict','dead')",
    # The lease sweep looks only at leased rows.
    "CREATE INDEX IF NOT EXISTS jobs_leased ON jobs (locked_until) WHERE status = 'leased'",
    # Retention pruning of done jobs by age.
    "CREATE INDEX IF NOT EXISTS jobs_done ON jobs (finished_at) WHERE status = 'done'",
    "CREATE INDEX IF NOT EXISTS work_orders_title ON work_orders (title COLLATE NOCASE)",
]

#: Per-entity order since migration 3: the open jobs of an entity. A query uses it only when it
#: spells the same condition, ``finished_at IS NULL`` (a ``status IN (...)`` list would scan).
#: Its condition must not name ``status``: SQLite rewrites an index entry whenever a column of
#: its condition changes, and every claim changes ``status``.
OPEN_JOBS_INDEX = "CREATE INDEX jobs_entity_open ON jobs (entity_key, id) WHERE finished_at IS NULL"
