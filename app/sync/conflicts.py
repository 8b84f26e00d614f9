"""Conflicts held on the device: capture on 409, show per field, resolve or send to an admin.

A conflicted job stays in the queue with status ``conflict`` (later edits of the same work
order wait behind it). Resolving it either re-sends a merged change through the queue (a new
idempotency key, the server's version as base) or gives it up in favour of the server's
record. Every decision goes to the audit log. Synchronous: run it off the UI loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from app.attachments.files import AttachmentFiles
from app.attachments.retention import forget_departed
from app.mutations import intended_fields
from app.records import EDITABLE_FIELDS, printable
from app.states import ConflictKind, ConflictStatus
from app.store.cache import apply_server_record
from app.store.db import connection
from app.store.errors import InvalidEditError, storage_errors
from app.store.scope import remove_departed
from app.store.store import Store
from app.sync.give_up import give_up

#: The longest note the server takes with an escalation (RaiseConflict.note).
NOTE_MAX = 2000

__all__ = ["ConflictView", "Conflicts", "FieldView"]

Choice = Literal["mine", "theirs", "restore"]
OPEN_STATUSES = ConflictStatus.unsettled()


@dataclass(frozen=True)
class FieldView:
    name: str
    base: Any
    mine: Any
    server: Any
    #: overlap (a person chooses) | mine | theirs | both (merged by itself) | same
    state: str


@dataclass(frozen=True)
class ConflictView:
    job_id: int
    entity_id: str
    kind: ConflictKind
    op: str
    status: ConflictStatus
    title: str
    fields: tuple[FieldView, ...]
    server_version: int
    server_updated_by: str | None
    server_updated_at: str | None
    review_id: str | None
    note: str | None
    created_at: float
    #: Why the server refused to open the review (the conflict is the person's again).
    review_problem: str | None = None

    @property
    def overlapping(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields if f.state == "overlap")

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "entity_id": self.entity_id,
            "kind": self.kind,
            "op": self.op,
            "status": self.status,
            "title": self.title,
            "server_version": self.server_version,
            "server_updated_by": self.server_updated_by,
            "server_updated_at": self.server_updated_at,
            "review_id": self.review_id,
            "review_problem": self.review_problem,
            "note": self.note,
            "created_at": self.created_at,
            "fields": [f.__dict__ for f in self.fields],
        }


def _base_of(mine: dict[str, Any], base: str | None) -> dict[str, Any]:
    """`{"base": …}` with the base values of the fields in `mine`, or nothing if unknown."""
    values = json.loads(base) if base else {}
    known = {name: values[name] for name in mine if name in values and name in EDITABLE_FIELDS}
    return {"base": known} if known else {}


class Conflicts:
    def __init__(self, store: Store) -> None:
        self.store = store

    # -- reads -------------------------------------------------------------------------------

    def views(self, *, include_resolved: bool = False) -> list[ConflictView]:
        statuses = (*OPEN_STATUSES, ConflictStatus.RESOLVED) if include_resolved else OPEN_STATUSES
        marks = ", ".join("?" for _ in statuses)
        with storage_errors(self.store.path):
            rows = (
                connection(self.store.db)
                .execute(
                    f"SELECT * FROM conflicts WHERE status IN ({marks}) ORDER BY created_at DESC",
                    statuses,
                )
                .fetchall()
            )
            names = [
                d[0]
                for d in connection(self.store.db).execute("SELECT * FROM conflicts").description
            ]
        return [self._view(dict(zip(names, row, strict=True))) for row in rows]

    def get(self, job_id: int) -> ConflictView:
        for view in self.views(include_resolved=True):
            if view.job_id == job_id:
                return view
        raise InvalidEditError(f"no conflict for job {job_id}")

    def open_for(self, entity_id: str) -> ConflictView | None:
        for view in self.views():
            if view.entity_id == entity_id:
                return view
        return None

    def _view(self, row: dict[str, Any]) -> ConflictView:
        base = json.loads(row["base"]) if row["base"] else {}
        mine = json.loads(row["mine"])
        server = json.loads(row["server"])
        overlapping = set(json.loads(row["overlapping"]))
        auto = json.loads(row["auto_merged"])
        fields = []
        for name in EDITABLE_FIELDS:
            mine_value = mine.get(name, base.get(name, server.get(name)))
            if name in overlapping:
                state = "overlap"
            elif name in auto:
                state = auto[name]
            else:
                state = "same"
            fields.append(FieldView(name, base.get(name), mine_value, server.get(name), state))
        return ConflictView(
            job_id=row["job_id"],
            entity_id=row["entity_key"],
            kind=ConflictKind(row["kind"]),
            op=row["op"],
            status=ConflictStatus(row["status"]),
            title=str(mine.get("title") or server.get("title") or ""),
            fields=tuple(fields),
            server_version=int(server.get("version") or 0),
            server_updated_by=server.get("updated_by"),
            server_updated_at=server.get("updated_at"),
            review_id=row["review_id"],
            note=row["note"],
            created_at=row["created_at"],
            review_problem=row["review_problem"],
        )

    # -- decisions ---------------------------------------------------------------------------

    def resolve(self, job_id: int, choice: Choice | dict[str, str]) -> str:
        """Decide a conflict. Returns ``resent`` (a merged change is queued) or ``discarded``
        (the server's record stands)."""
        view = self.get(job_id)
        if view.status == ConflictStatus.RESOLVED:
            raise InvalidEditError(f"conflict {job_id} is already resolved")
        picks = self._picks(view, choice)
        server = {f.name: f.server for f in view.fields}
        final = {f.name: (f.mine if picks.get(f.name) == "mine" else f.server) for f in view.fields}
        for f in view.fields:
            if f.state == "mine":
                final[f.name] = f.mine
        if choice == "restore" or (
            view.kind == ConflictKind.DELETED_ON_SERVER and picks.get("deleted") == "mine"
        ):
            final["deleted"] = False
        patch = {name: value for name, value in final.items() if value != server.get(name)}
        now = self.store.clock()
        with storage_errors(self.store.path), self.store.db.atomic():
            conn = connection(self.store.db)
            if view.op == "delete" and picks.get("deleted") == "mine":
                payload: dict[str, Any] | None = {"op": "delete", "fields": {}}
            elif patch:
                payload = {"op": "update", "fields": patch}
            else:
                payload = None
            if payload is None:
                give_up(self.store, job_id)  # the work order goes (if it left) at the end
                apply_server_record(
                    conn,
                    {
                        **server,
                        "id": view.entity_id,
                        "version": view.server_version,
                        "updated_by": view.server_updated_by,
                        "updated_at": view.server_updated_at,
                    },
                    now,
                )
                outcome = "discarded"
            else:
                self.store.queue.resend_resolved(job_id, payload, view.server_version)
                local = {k: v for k, v in final.items() if k in EDITABLE_FIELDS}
                local.update(intended_fields(payload))
                self.store.cache.apply_local(view.entity_id, local, now)
                outcome = "resent"
            self.store.queue.record_resolution(
                job_id,
                view.entity_id,
                {"outcome": outcome, "picks": picks},
                audit={"outcome": outcome, "picks": picks, "final": final},
            )
            departed = remove_departed(conn)  # it left the scope and nothing of it is unsent
        if departed:
            self._forget_departed()
        return outcome

    def _forget_departed(self) -> None:
        """The attachments of work orders that just left go in the same step (after the
        commit: their bytes must not go before the rows' removal is durable)."""
        forget_departed(self.store, AttachmentFiles(self.store.data_dir))

    @staticmethod
    def _picks(view: ConflictView, choice: Choice | dict[str, str]) -> dict[str, str]:
        needed = set(view.overlapping)
        if choice in ("mine", "restore"):
            return dict.fromkeys(needed, "mine")
        if choice == "theirs":
            return dict.fromkeys(needed, "theirs")
        if not isinstance(choice, dict):
            raise InvalidEditError(f"unknown choice {choice!r}")
        unknown = set(choice) - {f.name for f in view.fields}
        if unknown:
            raise InvalidEditError(f"unknown fields: {', '.join(sorted(unknown))}")
        bad = {v for v in choice.values() if v not in ("mine", "theirs")}
        if bad:
            raise InvalidEditError("each field takes mine or theirs")
        missing = needed - set(choice)
        if missing:
            raise InvalidEditError(f"choose mine or theirs for: {', '.join(sorted(missing))}")
        return dict(choice)

    # -- review queue ------------------------------------------------------------------------

    def escalate(self, job_id: int, note: str | None = None) -> None:
        """Send to an admin: durable first, delivered by the worker (``pending_escalations``).

        The note is checked against the server's rules here: refused at the next sync, the
        conflict would wait for a review that never comes."""
        if note is not None:
            if len(note) > NOTE_MAX:
                raise InvalidEditError(f"note: at most {NOTE_MAX} characters ({len(note)} given)")
            try:
                printable(note)
            except ValueError as exc:
                raise InvalidEditError(f"note: {exc}") from None
        view = self.get(job_id)
        if view.status != ConflictStatus.OPEN:
            raise InvalidEditError(f"conflict {job_id} is {view.status}, not open")
        self.store.queue.escalate(job_id, note)

    def pending_escalations(self) -> list[dict[str, Any]]:
        rows = self.store.read(
            "SELECT job_id, entity_key, mine, server, note, review_key, base FROM conflicts "
            "WHERE status = 'escalating'"
        )
        return [
            {
                "job_id": job_id,
                "review_key": key,
                "body": {
                    "entity_id": entity,
                    "base_version": int(json.loads(server).get("version") or 1),
                    "mine": json.loads(mine),
                    "note": note,
                    # What the edit started from: the reviewer's "before".
                    **_base_of(json.loads(mine), base),
                },
            }
            for job_id, entity, mine, server, note, key, base in rows
        ]

    def give_up(self, job_id: int) -> dict[str, Any]:
        """Discard a dead or conflicted edit and settle the one queued after it, atomically
        (the policy is `app.sync.give_up`); a work order that left the scope goes with its
        last unsent edit."""
        with storage_errors(self.store.path), self.store.db.atomic():
            entry = give_up(self.store, job_id)
            remove_departed(connection(self.store.db))
        # A create the server never had took its work order and its photos' uploads along.
        self._forget_departed()
        return entry

    def escalation_refused(self, job_id: int, problem: str) -> None:
        """The server refused to open the review (4xx): the conflict is the person's again,
        with the server's reason to show them."""
        self.store.queue.escalation_refused(job_id, problem)

    def mark_escalated(self, job_id: int, review_id: str) -> None:
        self.store.queue.mark_escalated(job_id, review_id)

    def escalated(self) -> list[tuple[int, str, str]]:
        """(job_id, entity_id, review_id) of conflicts waiting for an admin."""
        rows = self.store.read(
            "SELECT job_id, entity_key, review_id FROM conflicts WHERE status = 'escalated'"
        )
        return [(int(a), str(b), str(c)) for a, b, c in rows]

    def close_reviewed(self, job_id: int, decision: str, record: dict[str, Any]) -> None:
        """The admin decided: the server's record (resolved or kept) replaces the local edit."""
        with storage_errors(self.store.path), self.store.db.atomic():
            give_up(self.store, job_id)
            apply_server_record(connection(self.store.db), record, self.store.clock())
            self.store.queue.record_resolution(job_id, None, {"outcome": f"admin {decision}"})
            remove_departed(connection(self.store.db))
        self._forget_departed()
