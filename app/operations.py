"""Core operations a person triggers (save, retry, give up, resolve, settings, export).

Each write runs on the single-writer executor, returns its result, and publishes what it
changed as one `OpChanges` event on the bus (Anki's ``OpChanges`` and
``operation_did_execute``): the screens repaint from that one event instead of calling each
other, and no screen writes to ``store.queue`` or ``store.db`` itself.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from app.attachments.files import AttachmentFiles
from app.attachments.retention import forget_departed
from app.desktop.notifications import NOTIFICATIONS
from app.events import EventBus, OpChanges
from app.mutations import validate_mutation
from app.pending_export import ExportSummary, export_pending
from app.records import ValidationError, format_validation_error
from app.samples import remove_samples, sample_ids
from app.store.db import WriteTransaction, connection
from app.store.drafts import Draft, drop_draft, keep_draft, read_draft
from app.store.editing import hold_for_editing, release_all_editing, release_editing
from app.store.errors import InvalidEditError, StoreError, storage_errors
from app.store.settings import read_setting, write_setting
from app.store.store import EditResult, Store
from app.sync.conflicts import Choice, Conflicts

__all__ = [
    "SYNC_ON_METERED",
    "Operations",
    "check_payload",
    "retry_failed",
]

T = TypeVar("T")
Op = Literal["create", "update", "delete"]

#: The settings key of "sync on metered connections" (on unless turned off).
SYNC_ON_METERED = "ui.sync_on_metered"


class Executor(Protocol):
    """What `app.executor.StoreExecutor` offers: blocking store calls, one at a time."""

    async def run(self, fn: Callable[..., T], *args: Any) -> T: ...


def check_payload(payload: Any) -> dict[str, Any]:
    """An edited job payload checked with the server's rules: ``{"op", "fields"}`` cleaned,
    or InvalidEditError with a readable reason (nothing is written)."""
    if not isinstance(payload, dict) or set(payload) - {"op", "fields"}:
        raise InvalidEditError('Expected {"op": …, "fields": {…}} and nothing else')
    op, fields = payload.get("op"), payload.get("fields", {})
    if not isinstance(fields, dict):
        raise InvalidEditError('"fields" must be an object')
    try:
        # The id is the job's: only the operation and its fields are the person's to edit.
        checked = validate_mutation(str(op), _ANY_ID, fields)
    except ValidationError as exc:
        raise InvalidEditError(format_validation_error(exc)) from None
    except ValueError as exc:
        raise InvalidEditError(_sentence(str(exc))) from None
    return {"op": checked.op, "fields": checked.fields}


#: Stands for the failed job's own id while its edited payload is checked.
_ANY_ID = "00000000-0000-0000-0000-000000000000"


def _sentence(reason: str) -> str:
    """The contract's words (`app.mutations`) as a sentence on screen."""
    return reason[:1].upper() + reason[1:]


def retry_failed(store: Store, job_id: int, payload: dict[str, Any] | None = None) -> str:
    """Send a failed (dead or conflicted) change again; returns its idempotency key.

    Unchanged, it keeps its key (the server may have applied it already); edited, it is a new
    request with a new key, and the work order on this device shows the edited values at once,
    as a fresh save would."""
    clean = None if payload is None else check_payload(payload)
    with storage_errors(store.path), store.db.atomic():
        row = (
            connection(store.db)
            .execute("SELECT entity_key FROM jobs WHERE id = ?", (job_id,))
            .fetchone()
        )
        if row is None:
            raise StoreError(f"job {job_id} is not a dead or conflicted job")
        key = store.queue.retry_dead(job_id, clean)
        if clean is not None:
            entity_id, now = str(row[0]), store.clock()
            if clean["op"] == "create" and store.cache.server_snapshot(entity_id) is None:
                store.cache.apply_local(entity_id, clean["fields"], now)
            else:
                store.cache.restore_visible(entity_id, now)
    return key


def _entity_of(store: Store, job_id: int) -> str | None:
    with storage_errors(store.path):
        row = (
            connection(store.db)
            .execute("SELECT entity_key FROM jobs WHERE id = ?", (job_id,))
            .fetchone()
        )
    return None if row is None else str(row[0])


def _save_setting(store: Store, key: str, value: str) -> None:
    with storage_errors(store.path), store.db.atomic():
        write_setting(store, key, value)


def load_sync_on_metered(store: Store) -> bool:
    """On unless the person turned it off. Blocking: run it on the executor."""
    with storage_errors(store.path):
        return read_setting(store, SYNC_ON_METERED) != "0"


class Operations:
    """The core writes the UI calls, each publishing its `OpChanges`."""

    def __init__(
        self, store: Store, executor: Executor, events: EventBus, initiator: str = ""
    ) -> None:
        self.store = store
        self.executor = executor
        self.events = events
        self.initiator = initiator

    def by(self, initiator: str) -> Operations:
        """The same operations, their `OpChanges` naming ``initiator`` (a screen)."""
        return Operations(self.store, self.executor, self.events, initiator)

    def _publish(self, changes: OpChanges) -> None:
        self.events.publish(dataclasses.replace(changes, initiator=self.initiator))

    async def save_edit(
        self,
        op: Op,
        entity_id: str | None,
        fields: dict[str, Any],
        base_version: int | None = None,
        *,
        draft: str | None = None,
    ) -> EditResult:
        """Save one change on this device and queue it (`Store.record_edit`); the draft of
        the form ``draft`` names (`app.store.drafts`) goes in the same transaction."""

        def save() -> EditResult:
            store = self.store
            with WriteTransaction(store.db, store.path):
                result = store.record_edit(op, entity_id, fields, base_version=base_version)
                if draft is not None:
                    drop_draft(store, draft)
            return result

        result = await self.executor.run(save)
        self._publish(OpChanges(frozenset({result.entity_id}), queue=True))
        return result

    async def keep_draft(self, draft: Draft) -> None:
        """The person's typing on one form, kept through a kill; never sent."""
        await self.executor.run(keep_draft, self.store, draft)

    async def drop_draft(self, entity_id: str) -> bool:
        """The person saved or discarded the typing of this form ('': the new one)."""
        return await self.executor.run(drop_draft, self.store, entity_id)

    async def read_draft(self, entity_id: str) -> Draft | None:
        return await self.executor.run(read_draft, self.store, entity_id)

    async def hold_for_editing(self, entity_id: str) -> bool:
        """The editor shows this work order: it stays on the device while it does, even when
        a pull says it left the scope (`app.store.editing`). False: it is gone already."""
        return await self.executor.run(hold_for_editing, self.store, entity_id)

    async def release_editing(self, entity_id: str | None = None) -> set[str]:
        """The editor let go of ``entity_id`` (None: the app starts, and every hold of an
        earlier run goes). One that left the scope with nothing unsent leaves now; the
        ids that left are returned and published."""
        if entity_id is None:
            gone = await self.executor.run(release_all_editing, self.store)
        else:
            gone = await self.executor.run(release_editing, self.store, entity_id)
        if gone:
            # Their photos and files go with them, as after a pull.
            files = AttachmentFiles(self.store.data_dir)
            await self.executor.run(forget_departed, self.store, files)
            self._publish(OpChanges(frozenset(gone), attachments=True))
        return gone

    async def retry_failed(self, job_id: int, payload: dict[str, Any] | None = None) -> str:
        entity_id = await self.executor.run(_entity_of, self.store, job_id)
        try:
            return await self.executor.run(retry_failed, self.store, job_id, payload)
        finally:
            # Even a refused retry may have raced another change: repaint what it names.
            ids = frozenset({entity_id}) if entity_id else frozenset()
            self._publish(OpChanges(ids, queue=True, conflicts=True))

    async def give_up(self, job_id: int) -> dict[str, Any]:
        """Discard a failed or conflicted change (kept in the audit log)."""
        entry: dict[str, Any] = await self.executor.run(Conflicts(self.store).give_up, job_id)
        ids = frozenset({str(entry["entity_key"])})
        self._publish(OpChanges(ids, queue=True, conflicts=True))
        return entry

    async def resolve_conflict(self, job_id: int, choice: Choice | dict[str, str]) -> str:
        conflicts = Conflicts(self.store)
        view = await self.executor.run(conflicts.get, job_id)
        outcome: str = await self.executor.run(conflicts.resolve, job_id, choice)
        self._publish(OpChanges(frozenset({view.entity_id}), queue=True, conflicts=True))
        return outcome

    async def escalate_conflict(self, job_id: int, note: str | None) -> None:
        conflicts = Conflicts(self.store)
        view = await self.executor.run(conflicts.get, job_id)
        await self.executor.run(conflicts.escalate, job_id, note)
        self._publish(OpChanges(frozenset({view.entity_id}), queue=True, conflicts=True))

    async def set_notifications(self, enabled: bool) -> None:
        """Desktop notifications on or off, for the app and the worker alike."""
        await self.executor.run(_save_setting, self.store, NOTIFICATIONS, "1" if enabled else "0")
        self._publish(OpChanges(settings=True))

    async def remove_samples(self) -> list[str]:
        """The first run's sample work orders, all deleted (`app.samples`)."""
        removed: list[str] = await self.executor.run(remove_samples, self.store)
        self._publish(OpChanges(frozenset(removed), queue=True, settings=True))
        return removed

    async def sample_ids(self) -> list[str]:
        ids: list[str] = await self.executor.run(sample_ids, self.store)
        return ids

    async def set_sync_on_metered(self, enabled: bool) -> None:
        await self.executor.run(_save_setting, self.store, SYNC_ON_METERED, "1" if enabled else "0")
        self._publish(OpChanges(settings=True))

    async def export_pending(self, path: Path) -> ExportSummary:
        """Every unsent change as one JSON file (`app.pending_export`); changes nothing."""
        return await self.executor.run(export_pending, self.store, path)


def payload_from_text(text: str) -> dict[str, Any]:
    """The "Details" JSON a person edited, parsed and checked (InvalidEditError if not)."""
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidEditError(f"Not valid JSON: {exc.msg} (line {exc.lineno})") from None
    return check_payload(payload)
