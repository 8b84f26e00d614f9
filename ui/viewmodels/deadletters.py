"""The dead-letter panel: changes the server refused for good, and what to do about them.

Retry sends a job again unchanged (same idempotency key); edit-then-retry validates the edited
payload with the server's rules and sends it as a new request (new key), through the core
operation `Operations.retry_failed`, so the work order on this device shows the edit too;
discard asks first in QML and is written to the audit log (`Operations.give_up`). The list
reloads when an operation's OpChanges says the queue changed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.attachments import Attachments
from app.operations import payload_from_text
from app.store.deadletters import ERROR_KINDS, DeadJob, list_dead
from app.store.errors import InvalidEditError, StoreError
from app.store.store import Store
from ui.qt import Property, QObject, Signal, Slot, connect
from ui.services import Services
from ui.viewmodels.base import ListViewModel, notified, settable
from ui.viewmodels.deadform import form_fields, form_payload, refused_fields
from ui.wording import discard_question, kind_in_words, reason_in_words, when

__all__ = ["DeadLetterModel", "validate_payload"]

#: The initiator of this screen's operations (`OpChanges.initiator`).
INITIATOR = "dead-letters"

_OPS = {
    "create": "Create",
    "update": "Edit",
    "delete": "Delete",
    "upload": "Upload",
    "remove": "Removal",
}
#: A photo's or file's jobs (app.attachments): named by the file and its work order.
_FILE_OPS = ("upload", "remove")
#: A core operation on one failed job (retry it, give it up).
Operation = Callable[[int], Awaitable[object]]


def validate_payload(text: str) -> dict[str, Any]:
    """Parse and validate an edited job payload; raise ValueError with a readable reason."""
    try:
        return payload_from_text(text)
    except InvalidEditError as exc:
        raise ValueError(str(exc)) from None


def _export(path: Path, jobs: list[DeadJob]) -> Path:
    records = [
        {
            "job_id": job.id,
            "entity_id": job.entity_id,
            "title": job.title,
            "op": job.op,
            "payload": job.payload,
            "attempt_count": job.attempt_count,
            "last_error": job.last_error,
            "http_status": job.http_status,
            "error_kind": job.kind,
            "created_at": job.created_at,
            "failed_at": job.failed_at,
            "attempts": [a.__dict__ for a in job.attempts],
        }
        for job in jobs
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _dead_jobs(store: Store) -> list[DeadJob]:
    """Dead jobs; a failed upload (or removal) of a file reads as the file and its work order,
    "meter.png (Replace valve)", with the same actions as an edit."""
    files = Attachments(store)
    jobs = []
    for job in list_dead(store):
        if job.op in _FILE_OPS:
            view = files.get(str(job.payload.get("attachment_id", "")))
            order = store.work_order(view.entity_id) if view is not None else None
            name = view.filename if view is not None else "A removed file"
            job = replace(job, title=f"{name} ({order['title']})" if order else name)
        jobs.append(job)
    return jobs


class DeadLetterModel(ListViewModel[DeadJob]):
    """Dead jobs as rows, plus the selected job's details and actions.

    Signals:
        changed()  — filter, selection or details changed
        message(str)  — a result to tell the person (from ListViewModel)
    """

    changed = Signal()
    ROLE_NAMES = (
        "jobId",
        "when",
        "title",
        "op",
        "attempts",
        "errorText",
        "kind",
        "kindText",
        "checked",
    )

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._all: list[DeadJob] = []
        self._checked: set[int] = set()
        self._kind = ""
        self._selected: int = -1
        self._edit_error = ""
        # The selected job's form: its values as edited, and errors found here on Retry.
        self._form: dict[str, str] = {}
        self._form_job = -1
        self._form_errors: dict[str, str] | None = None
        # The row chosen while this form had edits: shown once the person says to discard.
        self._leaving_for = -1
        # One reload for a burst of operations (a bulk retry publishes one OpChanges a job).
        self._reload_timer = self._timer(30, self.reload, single_shot=True)
        connect(services.bridge.opChanges, self.on_bridge_op_changes)

    def on_bridge_op_changes(self, changes: dict[str, Any]) -> None:
        # This screen's own operations reload it when they end (`_reload_now`).
        if changes["queue"] and changes["initiator"] != INITIATOR:
            self._reload_timer.start()

    # -- model ------------------------------------------------------------------------------

    def _value(self, job: DeadJob, name: str) -> Any:
        return {
            "jobId": job.id,
            "when": when(job.failed_at),
            "title": job.title or f"Work order {job.entity_id[:8]}",
            "op": _OPS.get(job.op, job.op),
            "attempts": job.attempt_count,
            "errorText": reason_in_words(job.reason_code, job.last_error),
            "kind": job.kind,
            "kindText": kind_in_words(job.kind),
            "checked": job.id in self._checked,
        }[name]

    # -- loading ----------------------------------------------------------------------------

    @Slot()
    def reload(self) -> None:
        self._tasks.start(self._reload(), "dead-reload")

    async def _reload(self) -> None:
        jobs = await self._services.executor.run(_dead_jobs, self._services.store)
        self._all = jobs
        self._apply_filter()

    def _apply_filter(self) -> None:
        self.beginResetModel()
        self._rows = [job for job in self._all if not self._kind or job.kind == self._kind]
        live = {job.id for job in self._all}
        self._checked &= live
        if self._selected not in live:
            self._selected = self._rows[0].id if self._rows else -1
        if self._leaving_for not in live:
            self._leaving_for = -1
        self.endResetModel()
        self.changed.emit()

    # -- filter and selection ---------------------------------------------------------------

    kindFilter = settable(str, "_kind", changed, _apply_filter)

    @Property(list, notify=changed)
    def kindValues(self) -> list[str]:
        present = {job.kind for job in self._all}
        return ["", *(kind for kind in ERROR_KINDS if kind in present)]

    @Property(list, notify=changed)
    def kindLabels(self) -> list[str]:
        present = {job.kind for job in self._all}
        counts = {kind: sum(1 for job in self._all if job.kind == kind) for kind in present}
        labels = [f"All kinds ({len(self._all)})"]
        labels += [f"{kind_in_words(k)} ({counts[k]})" for k in ERROR_KINDS if k in present]
        return labels

    @Slot(int)
    def select(self, job_id: int) -> None:
        """Show another change; with unsaved edits in this one's form, ask first
        (`askingToDiscardEdits`: the person answers `keepEditing` or `discardEdits`)."""
        if job_id != self._selected and self._form_job == self._selected and self.formEdited:
            self._leaving_for = job_id
            self.changed.emit()
            return
        self._show(job_id)

    def _show(self, job_id: int) -> None:
        self._selected = job_id
        self._leaving_for = -1
        self._edit_error = ""
        self.changed.emit()

    @Property(bool, notify=changed)
    def askingToDiscardEdits(self) -> bool:
        return self._leaving_for >= 0

    @Slot()
    def keepEditing(self) -> None:
        self._leaving_for = -1
        self.changed.emit()

    @Slot()
    def discardEdits(self) -> None:
        """Drop this form's edits and show the change the person chose."""
        if self._leaving_for >= 0:
            self._form_job = -1
            self._show(self._leaving_for)

    # -- the form ---------------------------------------------------------------------------

    def _form_now(self) -> tuple[list[str], dict[str, str], dict[str, str]]:
        """The selected job's shown fields, their values as edited, and the stored ones."""
        job = self._job()
        if job is None:
            return [], {}, {}
        names, stored = form_fields(job.payload)
        if self._form_job != job.id:
            self._form_job, self._form, self._form_errors = job.id, dict(stored), None
        return names, self._form, stored

    @Property(list, notify=changed)
    def formNames(self) -> list[str]:
        return self._form_now()[0]

    @Property("QVariantMap", notify=changed)
    def formFields(self) -> dict[str, str]:
        return dict(self._form_now()[1])

    @Property("QVariantMap", notify=changed)
    def formErrors(self) -> dict[str, str]:
        """The server's reason beside each field it refused; after a refused Retry, ours."""
        self._form_now()
        if self._form_errors is not None:
            return dict(self._form_errors)
        job = self._job()
        return refused_fields(job.last_error if job else "")

    @Property(str, notify=changed)
    def reasonAbove(self) -> str:
        """Why it failed, above the form: the server's words are beside the fields they
        name (the whole reply stays in Details); a reason that names none is shown whole."""
        job = self._job()
        if job is None:
            return ""
        if refused_fields(job.last_error) and job.op != "delete":
            return reason_in_words(job.reason_code) + " The refused fields are marked below."
        return reason_in_words(job.reason_code, job.last_error)

    @Property(bool, notify=changed)
    def formEdited(self) -> bool:
        _, values, stored = self._form_now()
        return values != stored

    @Slot(str, str)
    def setFormField(self, name: str, value: str) -> None:
        self._form_now()
        self._form[name] = value
        self.changed.emit()

    @Slot(int, result=bool)
    def retryForm(self, job_id: int) -> bool:
        """Retry the selected change: unchanged, under its key; edited, checked by the
        contract first (errors go beside the fields, nothing is sent) and sent under a new
        key."""
        job = self._job()
        if job is None or job.id != job_id:
            return False
        _, values, stored = self._form_now()
        if values == stored:
            self.retry(job_id)
            return True
        payload, errors = form_payload(job.op, values)
        self._form_errors = errors if payload is None else None
        self.changed.emit()
        if payload is None:
            return False
        self._tasks.start(self._retry(job_id, payload), "dead-retry-form")
        return True

    @Slot(int, bool)
    def setChecked(self, job_id: int, checked: bool) -> None:
        if checked:
            self._checked.add(job_id)
        else:
            self._checked.discard(job_id)
        rows = [i for i, job in enumerate(self._rows) if job.id == job_id]
        self.repaint(rows, ["checked"])
        self.changed.emit()

    def _job(self) -> DeadJob | None:
        return next((job for job in self._all if job.id == self._selected), None)

    @Property(int, notify=changed)
    def count(self) -> int:
        return len(self._rows)

    @Property(int, notify=changed)
    def checkedCount(self) -> int:
        return len(self._checked)

    selectedJobId = notified(int, "_selected", changed)

    @Property("QVariantMap", notify=changed)
    def selected(self) -> dict[str, Any]:
        job = self._job()
        if job is None:
            return {}
        return {
            "jobId": job.id,
            "title": job.title or f"Work order {job.entity_id[:8]}",
            "entityId": job.entity_id,
            "op": _OPS.get(job.op, job.op),
            "errorText": reason_in_words(job.reason_code, job.last_error),
            "kindText": kind_in_words(job.kind),
            "when": when(job.failed_at),
            "queuedAt": when(job.created_at),
            "attempts": job.attempt_count,
            "payloadJson": json.dumps(job.payload, indent=2, ensure_ascii=False),
            "discardQuestion": discard_question(job.op),
        }

    @Property(list, notify=changed)
    def history(self) -> list[str]:
        """The selected job's attempts, one plain line each."""
        job = self._job()
        if job is None:
            return []
        lines = []
        for n, attempt in enumerate(job.attempts, start=1):
            status = f"HTTP {attempt.http_status}" if attempt.http_status else "no answer"
            took = f", {attempt.duration_ms:.0f} ms" if attempt.duration_ms is not None else ""
            reason = f": {attempt.error}" if attempt.error else ""
            lines.append(
                f"{n}. {when(attempt.started_at)} — {attempt.outcome} ({status}{took}){reason}"
            )
        return lines

    editError = notified(str, "_edit_error", changed)

    # -- actions ----------------------------------------------------------------------------

    @Slot(int)
    def retry(self, job_id: int) -> None:
        self._tasks.start(self._retry(job_id, None), "dead-retry")

    @Slot(int, str, result=bool)
    def retryEdited(self, job_id: int, payload_text: str) -> bool:
        """Validate first: an invalid edit stays here with the reason, nothing is sent."""
        try:
            payload = validate_payload(payload_text)
        except ValueError as exc:
            self._edit_error = str(exc)
            self.changed.emit()
            return False
        self._edit_error = ""
        self.changed.emit()
        self._tasks.start(self._retry(job_id, payload), "dead-retry-edited")
        return True

    @Slot()
    def retryChecked(self) -> None:
        """Send every checked change again, unchanged (each keeps its idempotency key)."""
        retry = self._services.operations.by(INITIATOR).retry_failed
        self._on_each(sorted(self._checked), retry, "Sending {} again.")

    async def _retry(self, job_id: int, payload: dict[str, Any] | None) -> None:
        try:
            await self._services.operations.by(INITIATOR).retry_failed(job_id, payload)
        except StoreError as exc:
            self.message.emit(str(exc))
        else:
            what = "Edited change queued as a new request." if payload else "Sending it again."
            self.message.emit(what)
        await self._reload_now()

    @Slot(int)
    def discard(self, job_id: int) -> None:
        self._discard([job_id])

    @Slot()
    def discardChecked(self) -> None:
        self._discard(sorted(self._checked))

    def _discard(self, job_ids: list[int]) -> None:
        give_up = self._services.operations.by(INITIATOR).give_up
        self._on_each(job_ids, give_up, "Discarded {}; kept in the audit log.")

    def _on_each(self, job_ids: list[int], action: Operation, done: str) -> None:
        self._tasks.start(self._each(job_ids, action, done), f"dead-{action.__name__}")

    async def _each(self, job_ids: list[int], action: Operation, done: str) -> None:
        """The core operation ``action`` on each job; one message for all."""
        count = 0
        for job_id in job_ids:
            try:
                await action(job_id)
                count += 1
            except StoreError as exc:
                self.message.emit(str(exc))
        if count:
            self.message.emit(done.format(f"{count} {'change' if count == 1 else 'changes'}"))
        await self._reload_now()

    async def _reload_now(self) -> None:
        """After this screen's own operations: the list is current when they finish (their
        OpChanges name this screen as the initiator, and it skips them)."""
        self._reload_timer.stop()
        await self._reload()

    @Slot(result=str)
    def exportChecked(self) -> str:
        """Write the checked jobs (or the selected one) as JSON in the data dir; the path."""
        ids = self._checked or ({self._selected} if self._selected >= 0 else set())
        jobs = [job for job in self._all if job.id in ids]
        if not jobs:
            self.message.emit("Select at least one change to export.")
            return ""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = self._services.store.data_dir / "exports" / f"failed-changes-{stamp}.json"
        self._tasks.start(self._export(path, jobs), "dead-export")
        return str(path)

    async def _export(self, path: Path, jobs: list[DeadJob]) -> None:
        written = await self._services.executor.run(_export, path, jobs)
        self.message.emit(f"Exported {len(jobs)} to {written}")
