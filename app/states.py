"""The names of states shared by the store, the sync engine, the events and the UI.

A leaf module (it imports only ``enum``), so anything may import it without a cycle. Each
enum is a ``StrEnum``: a member *is* its string, so the values stored in SQLite and carried in
events are unchanged and compare equal to the bare words older code and tests use. The job
state machine is drawn in `app.store.queue`.
"""

from __future__ import annotations

import enum
from typing import Literal

__all__ = [
    "RETRYING",
    "AttachmentState",
    "AttemptOutcome",
    "BadgeKind",
    "ConflictKind",
    "ConflictStatus",
    "Connectivity",
    "JobState",
    "JobStatus",
    "Reason",
    "ReplyKind",
    "attachment_state",
    "job_state",
]


class JobStatus(enum.StrEnum):
    """A queued change's place in the job state machine (the ``jobs.status`` column).

    The UI has its own words for some of them: a leased job is "Sending…", a dead one is a
    "Failed change" (the CLI says "dead letter"); the stored word is this one.
    """

    PENDING = "pending"
    LEASED = "leased"
    DONE = "done"
    DEAD = "dead"
    CONFLICT = "conflict"

    @classmethod
    def outstanding(cls) -> tuple[JobStatus, ...]:
        """Statuses that hold back later jobs for the same entity (per-entity order)."""
        return (cls.PENDING, cls.LEASED, cls.CONFLICT, cls.DEAD)

    @classmethod
    def needs_person(cls) -> tuple[JobStatus, ...]:
        """Statuses a person must settle (retry, edit, discard, resolve)."""
        return (cls.DEAD, cls.CONFLICT)


#: A pending job that failed and waits for its next attempt, as the UI shows it.
RETRYING: Literal["retrying"] = "retrying"

#: A job's state as the UI shows it: the queue's statuses, with a pending job that failed
#: and waits for its next attempt told apart as "retrying".
JobState = JobStatus | Literal["retrying"]


def job_state(status: str, attempt_count: int, last_error: str | None) -> JobState:
    """The one rule for "retrying": a pending job that was tried (``attempt_count`` > 0) and
    failed (``last_error``). A job a person sent again (`retry_dead` sets its attempts to 0
    and keeps the old error) is plain pending: it goes now, it does not wait for a retry."""
    if status == JobStatus.PENDING and attempt_count > 0 and last_error:
        return RETRYING
    return JobStatus(status)


class BadgeKind(enum.StrEnum):
    """A work order's sync badge (`ui.viewmodels.badges.badge_for`), in the order a person
    should worry about them; QML colours a badge by this word."""

    FAILED = "failed"
    CONFLICT = "conflict"
    REVIEW = "review"
    RETRYING = RETRYING  # the job state's word (`job_state`), its one home
    SENDING = "sending"
    PENDING = "pending"
    SYNCED = "synced"


class ConflictKind(enum.StrEnum):
    """What kind of disagreement a refused edit met (the ``conflicts.kind`` column): the
    conflict screen's headline. Decided by `app.sync.merge.conflict_kind`."""

    #: Both sides edited the work order.
    VERSION = "version"
    #: We edited it; the server deleted it meanwhile.
    DELETED_ON_SERVER = "deleted_on_server"
    #: We deleted it; the server edited it meanwhile.
    EDITED_ON_SERVER = "edited_on_server"
    #: We created it; the server already holds a work order with that id.
    EXISTS = "exists"


class ConflictStatus(enum.StrEnum):
    """Where a conflict is on its way to being settled (the ``conflicts.status`` column):
    OPEN (the person's to resolve), ESCALATING (sent for review, not yet acknowledged),
    ESCALATED (an admin's review holds it), RESOLVED."""

    OPEN = "open"
    ESCALATING = "escalating"
    ESCALATED = "escalated"
    RESOLVED = "resolved"

    @classmethod
    def unsettled(cls) -> tuple[ConflictStatus, ...]:
        return (cls.OPEN, cls.ESCALATING, cls.ESCALATED)

    @classmethod
    def in_review(cls) -> tuple[ConflictStatus, ...]:
        return (cls.ESCALATING, cls.ESCALATED)


class AttemptOutcome(enum.StrEnum):
    """How one delivery attempt ended (the ``attempts.outcome`` column)."""

    DONE = "done"
    RETRY = "retry"
    DEAD = "dead"
    CONFLICT = "conflict"
    LEASE_EXPIRED = "lease_expired"
    RELEASED = "released"
    #: A 409 that merged by itself: the job goes again with what the server lacks.
    AUTO_MERGED = "auto_merged"


class Connectivity(enum.StrEnum):
    """What the device knows about reaching the server; carried by ``ConnectivityChanged``.

    The UI words (issue 12): ONLINE "Online", OFFLINE "Offline" (the OS says no network),
    UNREACHABLE "Server unreachable" (a network, but the server does not answer), SIGNED_OUT
    "Signed out", PAUSED "Paused" (metered network and the person's setting), CONNECTING
    "Connecting…" (transient: until the first answer or failure of the server), DEGRADED (the
    server answers but refuses or fails changes), STOPPED (no engine runs: local-only mode).
    """

    ONLINE = "online"
    OFFLINE = "offline"
    UNREACHABLE = "unreachable"
    CONNECTING = "connecting"
    DEGRADED = "degraded"
    SIGNED_OUT = "signed_out"
    PAUSED = "paused"
    STOPPED = "stopped"


class ReplyKind(enum.StrEnum):
    """What a reply (or a failure to get one) means for a job: `app.sync.errors` decides,
    the ``attempts.kind`` column keeps it."""

    SUCCESS = "success"
    TRANSIENT = "transient"
    PERMANENT = "permanent"
    AUTH = "auth"
    CONFLICT = "conflict"


class Reason(enum.StrEnum):
    """Why an attempt ended as it did, as a stable code (the ``attempts.reason_code``
    column). The UI words a reason from this code, never from the stored English text."""

    APPLIED = "applied"
    #: Connect error, DNS, reset: the server went away or never came.
    NETWORK = "network"
    TIMEOUT = "timeout"
    #: Not JSON, or JSON of the wrong shape.
    MALFORMED = "malformed"
    #: 502, 503, 504, or the transport's own busy signal.
    SERVER_BUSY = "server_busy"
    RATE_LIMITED = "rate_limited"
    #: 409 idempotency_key_in_use: the first try is still being processed.
    KEY_IN_USE = "key_in_use"
    #: Any other 5xx.
    SERVER_ERROR = "server_error"
    VERSION_CONFLICT = "version_conflict"
    #: A 409 that merged by itself and was sent again.
    AUTO_MERGED = "auto_merged"
    #: 401: the token was refused.
    SIGNED_OUT = "signed_out"
    FORBIDDEN = "forbidden"
    #: 400 or 422: the server refused the values.
    INVALID = "invalid"
    KEY_REUSED = "key_reused"
    NOT_FOUND = "not_found"
    TOO_LARGE = "too_large"
    #: 415: the server does not take files of this content type (an attachment).
    UNSUPPORTED_TYPE = "unsupported_type"
    #: 460: an upload's bytes arrived damaged (tus checksum); sent again.
    CHECKSUM_MISMATCH = "checksum_mismatch"
    #: An attachment's bytes are no longer on this device.
    FILE_MISSING = "file_missing"
    #: Any other 4xx (a 409 other than the two above included).
    REFUSED = "refused"
    #: An admin's decision on a review someone else already decided.
    ALREADY_DECIDED = "already_decided"
    #: Out of attempts after transient failures.
    GAVE_UP = "gave_up"
    LEASE_EXPIRED = "lease_expired"


class AttachmentState(enum.StrEnum):
    """Where an attachment is on its way to the server, as ``fieldsync attachments`` and the
    editor's strip show it (issue 15). Derived from its row and its upload job, never stored.

    WAITING: nothing sent yet (behind edits, its work order's create, or the link); UPLOADING:
    the server holds ``offset`` of its bytes; UPLOADED: the server confirmed the whole file (a
    colleague's attachment is always this); FAILED: the server refused it (the reason is kept)
    or it ran out of attempts; a person retries or removes it.
    """

    WAITING = "waiting"
    UPLOADING = "uploading"
    UPLOADED = "uploaded"
    FAILED = "failed"


def attachment_state(
    *, mine: bool, confirmed: bool, job_status: str | None, upload_url: str | None, offset: int
) -> AttachmentState:
    """Where an attachment is, from its row and its upload job (pure): the one derivation,
    for its tile, its work order's counts and `fieldsync status`."""
    if confirmed or not mine:
        return AttachmentState.UPLOADED
    if job_status in (JobStatus.DEAD, JobStatus.CONFLICT, JobStatus.DONE):
        # Done yet not confirmed: given up (a failed upload discarded) before it was removed.
        return AttachmentState.FAILED
    if upload_url is not None or offset > 0 or job_status == JobStatus.LEASED:
        return AttachmentState.UPLOADING
    return AttachmentState.WAITING
