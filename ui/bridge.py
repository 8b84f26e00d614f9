"""The one bridge from the core to Qt: core events in, Qt Signals out.

View-models and QML listen to these signals; nothing in `ui/` subscribes to the EventBus or
touches the sync engine otherwise. Events are published on the asyncio loop, which under qasync
is the Qt thread; an event published from another thread still arrives queued on the Qt thread
because the bridge lives there and signals cross threads by value.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from app.events import (
    AuthRequired,
    ConflictRaised,
    ConnectivityChanged,
    Event,
    EventBus,
    JobStateChanged,
    JobStatesChanged,
    LastSyncChanged,
    OpChanges,
    QueueChanged,
    RecordsChanged,
    SyncProgress,
    UploadProgress,
)
from app.states import Connectivity
from ui.qt import QObject, Signal

log = logging.getLogger(__name__)

__all__ = ["Bridge", "from_number", "op_changes"]


def _number(value: float | None) -> float:
    return math.nan if value is None else float(value)


def from_number(value: float) -> float | None:
    """A bridge signal's NaN back to None."""
    return None if math.isnan(value) else value


class Bridge(QObject):
    """Core events as Qt signals.

    Signals:
        queueChanged(dict depth, float oldest_pending_age_s)  — NaN: nothing pending
        jobStateChanged(int job_id, str entity_id, str status, str error, float next_attempt_at)
                                                              — NaN: no next attempt
        jobStatesChanged(list changes)  — a batch at once: dicts with the keys job_id,
                                          entity_id, status, error ("": none) and
                                          next_attempt_at (NaN: none); each change is also
                                          emitted as jobStateChanged
        lastSyncChanged(float at)       — epoch seconds of the last sync
        recordsChanged(list entity_ids)   — empty list means "could be anything: reload"
        connectivityChanged(str state, str reason)
        conflictRaised(str entity_id, int job_id, str kind)
        syncProgress(int done, int total, str phase)
        authRequired(str server_url, str reason)
        opChanges(dict changes)         — what a core operation (app.operations) changed,
                                          every field of its OpChanges: entity_ids (sorted
                                          list), queue, conflicts, settings, attachments and
                                          initiator ("": the core)
        uploadProgress(dict change)     — an attachment's upload moved: attachment_id,
                                          entity_id, state, offset, size, reason ("": none)

    `connectivity` keeps the last state the engine published ("" before the first), for
    view-models that word something by it (the editor's "Saved. Sending…").
    """

    # WORKAROUND: no `object` arguments. PySide6 6.12 drops a reference to a None passed
    # through an `object` signal argument; ten thousand "leased" events later CPython aborts
    # ("deallocating True or False"/None). Missing numbers travel as NaN instead.
    queueChanged = Signal(dict, float)
    jobStateChanged = Signal(int, str, str, str, float)
    jobStatesChanged = Signal(list)
    lastSyncChanged = Signal(float)
    recordsChanged = Signal(list)
    connectivityChanged = Signal(str, str)
    conflictRaised = Signal(str, int, str)
    syncProgress = Signal(int, int, str)
    authRequired = Signal(str, str)
    opChanges = Signal(dict)
    uploadProgress = Signal(dict)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._unsubscribe: Callable[[], None] | None = None
        self.bus: EventBus | None = None
        self.connectivity = ""

    def attach(self, bus: EventBus) -> None:
        """Start forwarding `bus` events; a bridge follows one bus at a time."""
        self.detach()
        self.bus = bus
        self._unsubscribe = bus.subscribe(self.on_bus_event)

    def detach(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.bus = None

    def on_bus_event(self, event: Event) -> None:
        match event:
            case QueueChanged(depth=depth, oldest_pending_age_s=age):
                self.queueChanged.emit(dict(depth), _number(age))
            case JobStateChanged():
                self.jobStatesChanged.emit([_job_state(event)])
                self._emit_job_state(event)
            case JobStatesChanged(changes=changes):
                self.jobStatesChanged.emit([_job_state(change) for change in changes])
                for change in changes:
                    self._emit_job_state(change)
            case LastSyncChanged(at=at):
                self.lastSyncChanged.emit(at)
            case RecordsChanged(entity_ids=ids):
                self.recordsChanged.emit(sorted(ids))
            case ConnectivityChanged(state=state, reason=reason):
                self.connectivity = state
                self.connectivityChanged.emit(state, reason)
            case ConflictRaised(entity_id=entity_id, job_id=job_id, kind=kind):
                self.conflictRaised.emit(entity_id, job_id, kind)
            case SyncProgress(done=done, total=total, phase=phase):
                self.syncProgress.emit(done, total, phase)
            case AuthRequired(server_url=url, reason=reason):
                self.connectivity = Connectivity.SIGNED_OUT
                self.authRequired.emit(url, reason)
            case OpChanges():
                self.opChanges.emit(op_changes(event))
            case UploadProgress():
                self.uploadProgress.emit(
                    {
                        "attachment_id": event.attachment_id,
                        "entity_id": event.entity_id,
                        "state": str(event.state),
                        "offset": int(event.offset),
                        "size": int(event.size),
                        "reason": event.reason or "",
                    }
                )
            case _:
                log.debug("bridge ignores %s", type(event).__name__)

    def _emit_job_state(self, event: JobStateChanged) -> None:
        self.jobStateChanged.emit(
            event.job_id,
            event.entity_id,
            str(event.status),
            event.error or "",
            _number(event.next_attempt_at),
        )


def _job_state(change: JobStateChanged) -> dict[str, Any]:
    """One job's new state as `jobStatesChanged` carries it to QML and the view-models."""
    return {
        "job_id": change.job_id,
        "entity_id": change.entity_id,
        "status": str(change.status),
        "error": change.error or "",
        "next_attempt_at": _number(change.next_attempt_at),
    }


def op_changes(changes: OpChanges) -> dict[str, Any]:
    """An operation's `OpChanges` as `opChanges` carries it: every field, by its name."""
    return {
        "entity_ids": sorted(changes.entity_ids),
        "queue": changes.queue,
        "conflicts": changes.conflicts,
        "settings": changes.settings,
        "attachments": changes.attachments,
        "initiator": changes.initiator,
    }
