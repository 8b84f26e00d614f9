"""Core events: what the sync engine tells the UI (through ui/bridge.py) and the CLI.

Plain dataclasses and a tiny synchronous publisher, no Qt. Subscribers run on the publisher's
thread (the asyncio loop, which under qasync is the Qt thread) and must not block.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from app.states import Connectivity, JobStatus

__all__ = [
    "AuthRequired",
    "ConflictRaised",
    "Connectivity",
    "ConnectivityChanged",
    "Event",
    "EventBus",
    "JobStateChanged",
    "OpChanges",
    "QueueChanged",
    "RecordsChanged",
    "SyncProgress",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueueChanged:
    """Queue depth changed (enqueue, ack, dead, conflict...). Counts by status."""

    depth: dict[str, int]
    oldest_pending_age_s: float | None


@dataclass(frozen=True)
class JobStateChanged:
    job_id: int
    entity_id: str
    status: JobStatus
    error: str | None = None
    next_attempt_at: float | None = None


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
    kind: str  # version | deleted_on_server | edited_on_server


@dataclass(frozen=True)
class SyncProgress:
    done: int
    total: int
    phase: str  # flush | pull | revalidate | idle


@dataclass(frozen=True)
class OpChanges:
    """What one core write (an operation in `app.operations`) changed, so a screen repaints
    just that: the work orders it touched, and whether the queue, the conflicts or the
    settings changed (Anki's ``OpChanges``)."""

    entity_ids: frozenset[str] = field(default_factory=frozenset)
    queue: bool = False
    conflicts: bool = False
    settings: bool = False


@dataclass(frozen=True)
class AuthRequired:
    """The server refused the token (401): sync is paused until the person signs in again."""

    server_url: str
    reason: str


Event = (
    QueueChanged
    | JobStateChanged
    | RecordsChanged
    | ConnectivityChanged
    | ConflictRaised
    | SyncProgress
    | AuthRequired
    | OpChanges
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
