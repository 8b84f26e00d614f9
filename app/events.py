"""Core events: what the sync engine tells the UI (through ui/bridge.py) and the CLI.

Plain dataclasses and a tiny synchronous publisher, no Qt. Subscribers run on the publisher's
thread (the asyncio loop, which under qasync is the Qt thread) and must not block.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from app.states import AttachmentState, ConflictKind, Connectivity, JobState

__all__ = [
    "AuthRequired",
    "ConflictRaised",
    "Connectivity",
    "ConnectivityChanged",
    "Event",
    "EventBus",
    "JobState",
    "JobStateChanged",
    "JobStatesChanged",
    "LastSyncChanged",
    "OpChanges",
    "QueueChanged",
    "RecordsChanged",
    "SyncProgress",
    "UploadProgress",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueueChanged:
    """Queue depth changed (enqueue, ack, dead, conflict...). Counts by status."""

    depth: dict[str, int]
    oldest_pending_age_s: float | None


@dataclass(frozen=True)
class JobStateChanged:
    """One job's new state; ``next_attempt_at`` (wall clock) is set while it is retrying."""

    job_id: int
    entity_id: str
    status: JobState
    error: str | None = None
    next_attempt_at: float | None = None


@dataclass(frozen=True)
class JobStatesChanged:
    """Jobs changed state together: one event per delivered batch (its jobs leased, then
    every job's outcome), so that a drain of thousands costs one event per batch."""

    changes: tuple[JobStateChanged, ...]


@dataclass(frozen=True)
class LastSyncChanged:
    """The last sync (an acknowledged delivery or a completed pull) is now ``at`` (epoch s)."""

    at: float


@dataclass(frozen=True)
class RecordsChanged:
    """Cached work orders changed (local edit, ack, pulled from the server)."""

    entity_ids: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class ConnectivityChanged:
    state: Connectivity
    reason: str = ""


@dataclass(frozen=True)
class ConflictRaised:
    entity_id: str
    job_id: int
    kind: ConflictKind


@dataclass(frozen=True)
class SyncProgress:
    """How far the running phase is, at most every 250 ms and always at its end.

    ``flush``: ``done`` of ``total`` jobs of this flush answered. ``pull``: ``done`` changes
    received so far (``total`` 0: unknown until the feed ends). ``idle`` (0, 0): nothing runs.
    """

    done: int
    total: int
    phase: Literal["flush", "pull", "idle"]


@dataclass(frozen=True)
class OpChanges:
    """What one core write (an operation in `app.operations`) changed, so a screen repaints
    just that: the work orders it touched, and whether the queue, the conflicts or the
    settings changed (Anki's ``OpChanges``). The engine listens too: a change of the queue
    or of attachments wakes it, so no screen has to."""

    entity_ids: frozenset[str] = field(default_factory=frozenset)
    queue: bool = False
    conflicts: bool = False
    settings: bool = False
    #: Attachments of ``entity_ids`` were added, removed or sent again.
    attachments: bool = False
    #: Who asked for it (a screen's name, as `Operations.by` was given it; "" for the core):
    #: that screen has repainted already and may skip its own change.
    initiator: str = ""


@dataclass(frozen=True)
class UploadProgress:
    """An attachment's upload moved (a chunk went through) or ended (uploaded, failed): the
    server holds ``offset`` of ``size`` bytes. ``reason`` says why it failed."""

    attachment_id: str
    entity_id: str
    state: AttachmentState
    offset: int
    size: int
    reason: str | None = None


@dataclass(frozen=True)
class AuthRequired:
    """The server refused the token (401): sync is paused until the person signs in again."""

    server_url: str
    reason: str


Event = (
    QueueChanged
    | JobStateChanged
    | JobStatesChanged
    | LastSyncChanged
    | RecordsChanged
    | ConnectivityChanged
    | ConflictRaised
    | SyncProgress
    | AuthRequired
    | OpChanges
    | UploadProgress
)
Subscriber = Callable[[Event], None]


class EventBus:
    """Fan-out of core events. A failing subscriber is logged, never breaks the worker."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

        return unsubscribe

    def publish(self, event: Event) -> None:
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception:
                log.exception("event subscriber failed on %s", type(event).__name__)
