"""Turning server replies into queue outcomes and cache updates, one transaction per batch.

Synchronous (it runs on the store thread). The worker (`worker.py`) does the network part.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from app.attachments.files import AttachmentFiles
from app.attachments.retention import forget_departed
from app.credentials import scrub
from app.mutations import intended_fields
from app.records import server_record_problem
from app.states import ConflictKind
from app.store.cache import apply_server_record, apply_server_records
from app.store.db import WriteTransaction, sync_log
from app.store.queue import ClaimedJob, Outcome
from app.store.scope import remove_departed
from app.store.store import Store
from app.sync.errors import (
    Reason,
    ReplyKind,
    TransientError,
    classify_failure,
    classify_reply,
    declined,
    retry_reason,
)
from app.sync.merge import conflict_hold, intent_applied, three_way, unknown_base
from app.sync.transport import Reply

__all__ = [
    "DeliveryReport",
    "apply_replies",
    "build_mutation",
    "build_mutations",
]


@dataclass
class DeliveryReport:
    done: int = 0
    replayed: int = 0
    retried: int = 0
    dead: int = 0
    auto_merged: int = 0
    conflicts: list[tuple[int, str, ConflictKind]] = field(default_factory=list)  # job, entity
    auth_failed: bool = False
    transient_errors: list[str] = field(default_factory=list)
    entity_ids: set[str] = field(default_factory=set)
    latencies_s: list[float] = field(default_factory=list)
    #: Persistent counters to add in the batch's transaction (delivered/dead/retried per
    #: topic, retry reasons, duplicates, conflicts by kind): one statement per batch.
    tally: Counter[str] = field(default_factory=Counter)

    def count_retry(self, job: ClaimedJob, reason: str, error: str | None = None) -> None:
        """One job goes back to the queue for `reason`; ``error`` is a transient failure."""
        self.retried += 1
        self.tally[f"retried:{job.topic}"] += 1
        self.tally[f"retry_reason:{reason}"] += 1
        if error is not None:
            self.transient_errors.append(error)


def build_mutation(store: Store, job: ClaimedJob) -> dict[str, Any]:
    """The request body for a job. A job whose base version is unknown (its predecessor was
    given up) is based on the latest server version this device knows."""
    op = job.payload["op"]
    base = job.base_version
    if op != "create" and base is None:
        row = store.cache.get(job.entity_key)
        base = None if row is None else row["server_version"]
    return {
        "entity_id": job.entity_key,
        "op": op,
        "base_version": None if op == "create" else base,
        "fields": job.payload.get("fields", {}),
    }


def build_mutations(store: Store, jobs: list[ClaimedJob]) -> list[dict[str, Any]]:
    """The request bodies for a claimed batch, in one trip to the store thread."""
    return [build_mutation(store, job) for job in jobs]


def _record_of(reply: Reply, key: str) -> tuple[dict[str, Any] | None, str]:
    """The reply's record under ``key`` if the cache can store it, else None and why."""
    record = None if reply.body is None else reply.body.get(key)
    if record is None:
        return None, f"the reply lacks the expected record ({key!r})"
    problem = server_record_problem(record)
    if problem is not None:
        return None, f"unusable {problem}"
    return record, ""


def _reason(reason: str, reply: Reply) -> str:
    """The stored reason of an outcome: the server's words, never a credential it echoed."""
    extra = reply.detail or reply.error
    if extra and extra not in reason:
        return scrub(f"{reason}: {extra}"[:2000])
    return reason


def apply_replies(
    store: Store,
    results: list[tuple[ClaimedJob, dict[str, Any], Reply | TransientError]],
    duration_ms: float,
) -> DeliveryReport:
    """Record every job's outcome, and the server's records in the cache, atomically."""
    report = DeliveryReport()
    queue = store.queue
    now = store.clock()
    successes: list[tuple[ClaimedJob, Reply, dict[str, Any]]] = []
    # WriteTransaction, not db.atomic(): on a full disk SQLite has already rolled back, and
    # the error must leave as StorageFullError (the engine waits and says why), not as
    # peewee's "cannot rollback" (which stopped the engine). Committed without an fsync
    # (`JobQueue.unsynced`): every outcome here is learnt again. A power cut that forgets it
    # leaves the jobs leased; their leases expire, and each is sent again under its key and
    # answered as before (a replay), or by the server's state now (a conflict).
    with queue.unsynced(), WriteTransaction(store.db, store.path) as conn:
        for job, mutation, reply in results:
            report.entity_ids.add(job.entity_key)
            if isinstance(reply, TransientError):
                failure = classify_failure(reply)
                queue.retry(
                    job,
                    Outcome(str(reply), None, duration_ms, failure.kind, failure.code),
                    retry_after=reply.retry_after,
                )
                report.count_retry(job, retry_reason(failure), str(reply))
                continue
            verdict = classify_reply(reply.status, reply.error, reply.raw_error)
            outcome = Outcome(
                _reason(verdict.reason, reply),
                reply.status,
                duration_ms,
                verdict.kind,
                verdict.code,
            )
            malformed = verdict.code is Reason.MALFORMED
            problem = reply.raw_error or ""
            if verdict.kind is ReplyKind.SUCCESS:
                record, problem = _record_of(reply, "record")
                if record is not None:
                    successes.append((job, reply, record))
                    continue
                malformed = True
            if verdict.kind is ReplyKind.CONFLICT:
                current, problem = _record_of(reply, "current")
                if current is not None:
                    _conflict(store, conn, job, mutation, current, report, now, duration_ms)
                    continue
                malformed = True
            if malformed:
                problem = problem or "the reply is not the expected JSON"
                queue.retry(
                    job,
                    Outcome(
                        f"malformed reply: {problem}",
                        reply.status,
                        duration_ms,
                        ReplyKind.TRANSIENT,
                        Reason.MALFORMED,
                    ),
                )
                report.count_retry(job, str(Reason.MALFORMED), problem)
            elif verdict.kind is ReplyKind.AUTH:
                queue.release([job])
                report.auth_failed = True
            elif verdict.kind is ReplyKind.TRANSIENT:
                if declined(reply.status) and reply.retry_after is not None:
                    queue.refused(job, outcome, reply.retry_after)  # exactly as asked
                else:
                    queue.retry(job, outcome, retry_after=reply.retry_after)
                report.count_retry(job, retry_reason(verdict))
            else:
                queue.dead(job, outcome)
                report.dead += 1
                report.tally[f"dead:{job.topic}"] += 1
        if successes:
            _record_successes(store, conn, successes, report, now, duration_ms)
        if report.tally:
            queue.bump_many(sorted(report.tally.items()))
        # A work order that left the scope goes once its last unsent edit is delivered.
        departed = remove_departed(conn)
    if departed:
        # Its photos and files go in the same step, once the removal is committed and
        # durable: a power cut must not bring back a work order whose files are gone.
        sync_log(store.path)
        forget_departed(store, AttachmentFiles(store.data_dir))
    return report


def _record_successes(
    store: Store,
    conn: Any,
    successes: list[tuple[ClaimedJob, Reply, dict[str, Any]]],
    report: DeliveryReport,
    now: float,
    duration_ms: float,
) -> None:
    """Ack the applied jobs in one ``ack_many`` (not a savepoint per job), then cache the
    server's records. A claim holds one job per entity, so no other job of the batch touches
    these records; each ack still precedes its record, which then counts as synced."""
    store.queue.ack_many(
        (job, Outcome(None, reply.status, duration_ms), record["version"])
        for job, reply, record in successes
    )
    apply_server_records(conn, [record for _, _, record in successes], now)
    for job, reply, _ in successes:
        report.done += 1
        report.tally[f"delivered:{job.topic}"] += 1
        report.latencies_s.append(max(now - job.created_at, 0.0))
        if reply.replayed:
            report.replayed += 1
            report.tally["duplicates_detected"] += 1


def _conflict(
    store: Store,
    conn: Any,
    job: ClaimedJob,
    mutation: dict[str, Any],
    current: dict[str, Any],
    report: DeliveryReport,
    now: float,
    duration_ms: float,
) -> None:
    queue = store.queue
    op = mutation["op"]
    fields = mutation["fields"]
    if intent_applied(op, fields, current):
        # Applied by an earlier try whose reply was lost (and whose key has expired).
        queue.ack(job, Outcome(None, 409, duration_ms), result_version=current["version"])
        apply_server_record(conn, current, now)
        report.done += 1
        report.tally["conflicts_already_applied"] += 1
        return
    base = store.cache.server_snapshot(job.entity_key) if op != "create" else None
    mine = intended_fields(mutation)
    merge_base = base
    if base is not None and base.get("version") != mutation["base_version"]:
        # A pull moved the cached snapshot past the version this edit was made on (while it
        # waited for a retry): its true base is unknown, so every field it sets that the
        # server holds differently goes to a person instead of silently overwriting theirs.
        base = None
        merge_base = unknown_base()
    merge = three_way(merge_base, mine, current)
    if op == "update" and not current.get("deleted") and not merge.overlapping and not merge.patch:
        # Nothing of mine is missing on the server (my edit set values the base already had):
        # done, and the server's values show. An empty patch would be refused as invalid.
        queue.ack(job, Outcome(None, 409, duration_ms), result_version=current["version"])
        apply_server_record(conn, current, now)
        report.done += 1
        report.tally["conflicts_auto_merged"] += 1
        return
    apply_server_record(conn, current, now)
    if op == "update" and not current.get("deleted") and not merge.overlapping:
        # Changed on different fields: merge by itself and send only what the server lacks.
        queue.requeue_merged(
            job,
            {"op": "update", "fields": merge.patch},
            current["version"],
            Outcome("merged with the server's newer version", 409, duration_ms),
        )
        report.auto_merged += 1
        report.tally["conflicts_auto_merged"] += 1
        return
    queue.conflict(
        job,
        Outcome(
            "the work order changed on the server",
            409,
            duration_ms,
            ReplyKind.CONFLICT,
            Reason.VERSION_CONFLICT,
        ),
    )
    hold = conflict_hold(job.entity_key, op, mine, base, current, merge)
    queue.open_conflict(job.id, hold)
    report.tally[f"conflicts_{hold.kind}"] += 1
    report.conflicts.append((job.id, job.entity_key, hold.kind))
