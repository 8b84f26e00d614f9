"""The queue's value types (a claimed job, an attempt's outcome, a conflict hold) and the
state every part of `JobQueue` shares; the queue itself is in `app.store.queue`."""

from __future__ import annotations

import json
import random
import sqlite3
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import peewee as pw

from app.states import ConflictKind
from app.store.backoff import BackoffPolicy
from app.store.db import in_batches

__all__ = [
    "PRIORITY_BACKGROUND",
    "PRIORITY_IMPORT",
    "PRIORITY_USER",
    "STALE",
    "TOPIC_ATTACHMENTS",
    "TOPIC_WORK_ORDERS",
    "ClaimedJob",
    "Clock",
    "ConflictHold",
    "Outcome",
    "QueueConfig",
    "QueueParts",
    "Stale",
    "entities_with_open_jobs",
    "new_idempotency_key",
]

PRIORITY_USER = 100
PRIORITY_IMPORT = 10
PRIORITY_BACKGROUND = 0

#: What a job is for, and so who claims it: work order mutations (the delivery pipeline) and
#: attachment uploads and removals (the uploader, `app.sync.uploader`).
TOPIC_WORK_ORDERS = "work_orders"
TOPIC_ATTACHMENTS = "attachments"

Clock = Callable[[], float]

#: What an outcome method returns when the lease was lost and nothing changed: not a status.
Stale = Literal["stale"]
STALE: Stale = "stale"


@dataclass(frozen=True)
class QueueConfig:
    lease_seconds: float = 60.0
    max_attempts: int = 12
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    done_retention_seconds: float = 7 * 86400.0


@dataclass(frozen=True)
class ClaimedJob:
    id: int
    topic: str
    payload: dict[str, Any]
    payload_version: int
    idempotency_key: str
    entity_key: str
    base_version: int | None
    priority: int
    attempt_count: int
    correlation_id: str
    created_at: float
    claimed_at: float
    locked_until: float
    #: The worker holding the lease: with locked_until, the fencing token of this claim.
    locked_by: str = ""


@dataclass(frozen=True)
class Outcome:
    """What one attempt ended with; recorded in the attempt history."""

    error: str | None = None
    http_status: int | None = None
    duration_ms: float | None = None
    #: What the reply meant (a ``ReplyKind``) and why, as a code (a ``Reason``): what the
    #: UI words; ``error`` keeps the words and the server's detail.
    kind: str | None = None
    code: str | None = None


@dataclass(frozen=True)
class ConflictHold:
    """What a job held for a person keeps: its edit, the server's record and how they differ
    (a row of ``conflicts``, the conflict screen's source)."""

    entity_key: str
    kind: ConflictKind
    op: str
    base: dict[str, Any] | None
    mine: dict[str, Any]
    server: dict[str, Any]
    overlapping: tuple[str, ...]
    auto_merged: dict[str, str]


def new_idempotency_key() -> str:
    return str(uuid.uuid4())


def payload_text(payload: dict[str, Any]) -> str:
    """A job payload as stored: compact JSON, one spelling, so that equal means unchanged."""
    return json.dumps(payload, separators=(",", ":"))


def entities_with_open_jobs(
    conn: sqlite3.Connection, entity_keys: Iterable[str], *, chained_only: bool = False
) -> set[str]:
    """Which of these entities have a job still outstanding (pending, leased, in conflict or
    dead); with ``chained_only``, one waiting for its base version. One query per 500 keys."""
    found: set[str] = set()
    keys = sorted(set(entity_keys))
    chained = " AND chained = 1" if chained_only else ""
    for chunk, marks in in_batches(keys):
        found.update(
            key
            for (key,) in conn.execute(
                f"SELECT DISTINCT entity_key FROM jobs WHERE entity_key IN ({marks}) "
                f"AND finished_at IS NULL{chained}",
                chunk,
            )
        )
    return found


class QueueParts:
    """What the parts of `JobQueue` share: the database, the clock and the configuration."""

    db: pw.SqliteDatabase
    path: Path
    config: QueueConfig
    clock: Clock
    rng: random.Random

    def _bump(self, conn: sqlite3.Connection, name: str, amount: int) -> None:
        self._bump_many(conn, [(name, amount)])

    @staticmethod
    def _bump_many(conn: sqlite3.Connection, amounts: Iterable[tuple[str, int]]) -> None:
        conn.executemany(
            "INSERT INTO counters (name, value) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
            amounts,
        )
