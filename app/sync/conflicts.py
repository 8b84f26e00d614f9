"""Conflicts held on the device: capture on 409, show per field, resolve or send to an admin.

A conflicted job stays in the queue with status ``conflict`` (later edits of the same work
order wait behind it). Resolving it either re-sends a merged change through the queue (a new
idempotency key, the server's version as base) or gives it up in favour of the server's
record. Every decision goes to the audit log. Synchronous: run it off the UI loop.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from app.mutations import intended_fields
from app.records import EDITABLE_FIELDS, printable
from app.store.cache import apply_server_record
from app.store.db import connection
from app.store.errors import InvalidEditError, storage_errors
from app.store.store import Store
from app.sync.merge import Merge, three_way, unknown_base

#: The longest note the server takes with an escalation (RaiseConflict.note).
NOTE_MAX = 2000

__all__ = ["ConflictView", "Conflicts", "FieldView"]

Choice = Literal["mine", "theirs", "restore"]
OPEN_STATUSES = ("open", "escalating", "escalated")


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
    kind: str  # version | deleted_on_server | edited_on_server | exists
    op: str
    status: str  # open | escalating | escalated | resolved
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


def conflict_kind(op: str, mine: dict[str, Any], server: dict[str, Any]) -> str:
    if op == "create":
        return "exists"
    if op == "delete":
        return "edited_on_server"
    if server.get("deleted") and not mine.get("deleted"):
        return "deleted_on_server"
    return "version"


class Conflicts:
    def __init__(self, store: Store) -> None:
        self.store = store

    # -- capture (inside the delivery transaction) ---------------------------------------------

    def capture(
        self,
        job_id: int,
        entity_id: str,
        op: str,
        mine: dict[str, Any],
        base: dict[str, Any] | None,
        server: dict[str, Any],
        merge: Merge,
    ) -> str:
        kind = conflict_kind(op, mine, server)
        overlapping = list(merge.overlapping)
        if kind != "version" and not overlapping:
            # A delete against an edit, or an edit against a delete: always a person's call.
            overlapping = ["deleted"]
        connection(self.store.db).execute(
            "INSERT OR REPLACE INTO conflicts (job_id, entity_key, kind, op, base, mine, server, "
            "overlapping, auto_merged, status, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'open', ?)",
            (
                job_id,
                entity_id,
                kind,
                op,
                None if base is None else json.dumps(base),
                json.dumps(mine),
                json.dumps(server),
                json.dumps(overlapping),
                json.dumps(merge.auto_merged),
                self.store.clock(),
            ),
        )
        return kind

    # -- reads -------------------------------------------------------------------------------

    def views(self, *, include_resolved: bool = False) -> list[ConflictView]:
        statuses = (*OPEN_STATUSES, "resolved") if include_resolved else OPEN_STATUSES
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
            kind=row["kind"],
            op=row["op"],
            status=row["status"],
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
        if view.status == "resolved":
            raise InvalidEditError(f"conflict {job_id} is already resolved")
        picks = self._picks(view, choice)
        server = {f.name: f.server for f in view.fields}
        final = {f.name: (f.mine if picks.get(f.name) == "mine" else f.server) for f in view.fields}
        for f in view.fields:
            if f.state == "mine":
                final[f.name] = f.mine
        if choice == "restore" or (
            view.kind == "deleted_on_server" and picks.get("deleted") == "mine"
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
                self.give_up(job_id)
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
                resent = conn.execute(
                    "UPDATE jobs SET payload = ?, idempotency_key = ?, base_version = ?, "
                    "chained = 0, status = 'pending', attempt_count = 0, next_attempt_at = ?, "
                    "last_error = NULL, finished_at = NULL, updated_at = ? "
                    "WHERE id = ? AND status = 'conflict'",
                    (json.dumps(payload), str(uuid.uuid4()), view.server_version, now, now, job_id),
                )
                if resent.rowcount != 1:
                    raise InvalidEditError(f"job {job_id} is no longer in conflict")
                local = {k: v for k, v in final.items() if k in EDITABLE_FIELDS}
                local.update(intended_fields(payload))
                self.store.cache.apply_local(view.entity_id, local, now)
                outcome = "resent"
            conn.execute(
                "UPDATE conflicts SET status = 'resolved', resolved_at = ?, resolution = ? "
                "WHERE job_id = ?",
                (now, json.dumps({"outcome": outcome, "picks": picks}), job_id),
            )
            conn.execute(
                "INSERT INTO audit_log (at, action, job_id, entity_key, detail) "
                "VALUES (?, 'resolve_conflict', ?, ?, ?)",
                (
                    now,
                    job_id,
                    view.entity_id,
                    json.dumps({"outcome": outcome, "picks": picks, "final": final}),
                ),
            )
        return outcome

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
        if view.status != "open":
            raise InvalidEditError(f"conflict {job_id} is {view.status}, not open")
        with storage_errors(self.store.path), self.store.db.atomic():
            connection(self.store.db).execute(
                "UPDATE conflicts SET status = 'escalating', note = ?, review_key = ?, "
                "review_problem = NULL WHERE job_id = ?",
                (note, str(uuid.uuid4()), job_id),
            )

    def pending_escalations(self) -> list[dict[str, Any]]:
        with storage_errors(self.store.path):
            rows = (
                connection(self.store.db)
                .execute(
                    "SELECT job_id, entity_key, mine, server, note, review_key FROM conflicts "
                    "WHERE status = 'escalating'"
                )
                .fetchall()
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
                },
            }
            for job_id, entity, mine, server, note, key in rows
        ]

    def give_up(self, job_id: int) -> dict[str, Any]:
        """Discard a dead or conflicted edit (``Store.discard``) and settle the edit queued
        after it, atomically. That one was made on top of the given-up edit, on what the
        person saw then. It goes against the server's version as it is now only when the
        server changed none of the fields it sets since (a delete: none at all); otherwise it
        goes against the version the person saw, or, when that is unknown (a create the
        server turned out to have), it is held as a conflict right away. Sent against the
        newest version unchecked, it would overwrite what the person just chose to keep."""
        with storage_errors(self.store.path), self.store.db.atomic():
            entry = self.store.discard(job_id)
            self._settle_next(entry)
        return entry

    def _settle_next(self, given_up: dict[str, Any]) -> None:
        conn = connection(self.store.db)
        entity = str(given_up["entity_key"])
        after = conn.execute(
            "SELECT id, payload FROM jobs WHERE entity_key = ? AND id > ? "
            "AND finished_at IS NULL AND chained = 1 AND status = 'pending' ORDER BY id LIMIT 1",
            (entity, given_up["id"]),
        ).fetchone()
        server = self.store.cache.server_snapshot(entity)
        if after is None or server is None:
            return
        payload = json.loads(after[1])
        op = str(payload.get("op"))
        mine = intended_fields(payload)
        seen = self._seen_before(given_up)
        touched = EDITABLE_FIELDS if op == "delete" else tuple(mine)
        if seen is not None and all(seen.get(f) == server.get(f) for f in touched):
            base: int | None = int(server["version"])  # nothing it sets moved: no conflict
        else:
            base = given_up["base_version"]
        if base is not None:
            conn.execute(
                "UPDATE jobs SET base_version = ?, chained = 0, updated_at = updated_at "
                "WHERE id = ?",
                (base, after[0]),
            )
            return
        conn.execute(
            "UPDATE jobs SET status = 'conflict', chained = 0, last_error = ?, updated_at = ? "
            "WHERE id = ?",
            ("made on a record the server had differently", self.store.clock(), after[0]),
        )
        self.capture(
            after[0], entity, op, mine, None, server, three_way(unknown_base(), mine, server)
        )

    def _seen_before(self, given_up: dict[str, Any]) -> dict[str, Any] | None:
        """The values the person saw when making the given-up edit, if the device knows them:
        the base stored with its conflict, or its own fields for a create."""
        row = (
            connection(self.store.db)
            .execute("SELECT base FROM conflicts WHERE job_id = ?", (given_up["id"],))
            .fetchone()
        )
        if row is not None and row[0]:
            return dict(json.loads(row[0]))
        if given_up["payload"].get("op") == "create":
            return intended_fields(given_up["payload"])
        return None

    def escalation_refused(self, job_id: int, problem: str) -> None:
        """The server refused to open the review (4xx): the conflict is the person's again,
        with the server's reason to show them."""
        with storage_errors(self.store.path), self.store.db.atomic():
            connection(self.store.db).execute(
                "UPDATE conflicts SET status = 'open', review_key = NULL, review_problem = ? "
                "WHERE job_id = ? AND status = 'escalating'",
                (problem, job_id),
            )

    def mark_escalated(self, job_id: int, review_id: str) -> None:
        with storage_errors(self.store.path), self.store.db.atomic():
            connection(self.store.db).execute(
                "UPDATE conflicts SET status = 'escalated', review_id = ? WHERE job_id = ?",
                (review_id, job_id),
            )

    def escalated(self) -> list[tuple[int, str, str]]:
        """(job_id, entity_id, review_id) of conflicts waiting for an admin."""
        with storage_errors(self.store.path):
            return [
                (int(a), str(b), str(c))
                for a, b, c in connection(self.store.db).execute(
                    "SELECT job_id, entity_key, review_id FROM conflicts WHERE status = 'escalated'"
                )
            ]

    def close_reviewed(self, job_id: int, decision: str, record: dict[str, Any]) -> None:
        """The admin decided: the server's record (resolved or kept) replaces the local edit."""
        now = self.store.clock()
        with storage_errors(self.store.path), self.store.db.atomic():
            conn = connection(self.store.db)
            self.give_up(job_id)
            apply_server_record(conn, record, now)
            conn.execute(
                "UPDATE conflicts SET status = 'resolved', resolved_at = ?, resolution = ? "
                "WHERE job_id = ?",
                (now, json.dumps({"outcome": f"admin {decision}"}), job_id),
            )
