"""The local store as the UI and the command line use it: one edit, one transaction.

``record_edit`` validates a change with the server's rules, writes it to the cache and enqueues
its job in the same transaction: both are durable, or neither is.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from app.mutations import UPDATE_NEEDS_FIELDS, validate_mutation
from app.records import ValidationError, format_validation_error
from app.store.cache import WorkOrderCache
from app.store.db import DB_FILENAME, WriteTransaction, connection, open_database
from app.store.errors import InvalidEditError, storage_errors
from app.store.jobs import PRIORITY_IMPORT, PRIORITY_USER, TOPIC_WORK_ORDERS
from app.store.queue import JobQueue, QueueConfig
from app.store.scope import ListScope
from app.store.stats import queue_stats

__all__ = ["TOPIC_WORK_ORDERS", "EditResult", "Store"]


@dataclass(frozen=True)
class EditResult:
    """What an edit changed, so the UI can repaint just that row."""

    entity_id: str
    job_id: int
    op: str


class Store:
    """The device database: cache + queue, opened from a data dir."""

    def __init__(
        self,
        data_dir: Path,
        *,
        synchronous: str = "FULL",
        queue_config: QueueConfig | None = None,
        clock: Any = time.time,
        rng: random.Random | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.path = data_dir / DB_FILENAME
        self.clock = clock
        self.db = open_database(self.path, synchronous=synchronous)
        self.queue = JobQueue(self.db, self.path, queue_config, clock=clock, rng=rng)
        self.cache = WorkOrderCache(self.db, self.path)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- edits -------------------------------------------------------------------------------

    def record_edit(
        self,
        op: Literal["create", "update", "delete"],
        entity_id: str | None = None,
        fields: dict[str, Any] | None = None,
        *,
        base_version: int | None = None,
        priority: int = PRIORITY_USER,
    ) -> EditResult:
        """Save one change locally and queue it for the server, atomically.

        ``base_version`` is the server version the person was looking at; by default the
        cached one. Raises InvalidEditError (nothing written) on invalid input.
        """
        fields = dict(fields or {})
        with WriteTransaction(self.db, self.path):
            return self._record(op, entity_id, fields, base_version, priority)

    def discard(self, job_id: int) -> dict[str, Any]:
        """Give up on a dead or conflicted edit (kept in the audit log), atomically with what
        follows from it:

        - a create the server never had takes the edits queued after it along (they could
          never reach it), and the uploads and removals of its attachments (waiting for
          it), and the work order leaves the device;
        - otherwise the work order shows the server's record with the edits still queued on
          top. What the next queued edit (made on top of the given-up one) is sent against is
          a conflict question for the give-up policy (``app.sync.give_up.give_up``, the one
          entry point of a discard, which calls this).
        """
        with WriteTransaction(self.db, self.path):
            entry = self.queue.discard(job_id)
            entity = str(entry["entity_key"])
            if entry["payload"].get("op") == "create" and not self.cache.server_snapshot(entity):
                self.queue.discard_after(entity, job_id)
                self.queue.discard_waiting_for(entity)
            self.cache.restore_visible(entity, self.clock())
        return entry

    def import_records(
        self,
        records: Iterable[dict[str, Any]],
        *,
        chunk: int = 500,
        labels: Sequence[str] | None = None,
    ) -> list[str]:
        """Bulk offline creates at import priority: every record is checked first, so a bad
        one (named by its label, else "record N") aborts the import with nothing saved; then
        one transaction per chunk."""
        checked: list[tuple[str, dict[str, Any]]] = []
        named: dict[str, str] = {}  # id given in the file -> where
        for number, record in enumerate(records, start=1):
            where = labels[number - 1] if labels is not None else f"record {number}"
            record = dict(record)
            given = record.pop("id", None)
            try:
                create = validate_mutation("create", str(given) if given else None, record)
                entity_id = create.entity_id or str(uuid.uuid4())
                checked.append((entity_id, create.fields))
            except (ValidationError, ValueError) as exc:
                raise InvalidEditError(f"{where}: {_reason(exc)}") from None
            if given:
                if entity_id in named:
                    raise InvalidEditError(
                        f"{where}: work order {entity_id} is also at {named[entity_id]}"
                    )
                named[entity_id] = where
        with storage_errors(self.path):
            for existing in self.cache.existing(list(named)):
                raise InvalidEditError(f"{named[existing]}: work order {existing} already exists")
        created: list[str] = []
        for start in range(0, len(checked), chunk):
            created.extend(self._write_creates(checked[start : start + chunk]))
        return created

    def _write_creates(self, batch: list[tuple[str, dict[str, Any]]]) -> list[str]:
        with WriteTransaction(self.db, self.path):
            for entity_id, fields in batch:
                self._record("create", entity_id, fields, None, PRIORITY_IMPORT)
        return [entity_id for entity_id, _ in batch]

    def _record(
        self,
        op: str,
        entity_id: str | None,
        fields: dict[str, Any],
        base_version: int | None,
        priority: int,
    ) -> EditResult:
        now = self.clock()
        fresh_id = False
        try:
            if op == "update" and not fields and entity_id:
                # The contract's word, with what it means for the person at the device.
                raise InvalidEditError(f"nothing to change: {UPDATE_NEEDS_FIELDS}")
            checked = validate_mutation(op, entity_id, fields)
        except (ValidationError, ValueError) as exc:
            raise InvalidEditError(_reason(exc)) from None
        entity_id = checked.entity_id
        if checked.op == "create":
            if entity_id is None:
                # A fresh UUID4 is well formed and (the primary key enforces it) new.
                entity_id = str(uuid.uuid4())
                fresh_id = True
            elif self.cache.exists(entity_id):
                raise InvalidEditError(f"work order {entity_id} already exists")
            self.cache.insert_local(entity_id, checked.fields, now)
        else:
            assert entity_id is not None
            current = self.cache.get(entity_id)
            if current is None:
                raise InvalidEditError(f"no work order {entity_id} on this device")
            if current["deleted"]:
                raise InvalidEditError(f"work order {entity_id} is deleted")
            if base_version is None:
                base_version = current["server_version"]
            self.cache.apply_local(entity_id, checked.intended(), now)
        job_id = self.queue.enqueue(
            TOPIC_WORK_ORDERS,
            {"op": checked.op, "fields": checked.fields},
            entity_id,
            priority=priority,
            base_version=base_version,
            new_entity=fresh_id,
        )
        return EditResult(entity_id=entity_id, job_id=job_id, op=checked.op)

    # -- reads -------------------------------------------------------------------------------
    # What the screens show of the cache: they read through these, never `cache` itself.

    def work_order(self, entity_id: str) -> dict[str, Any] | None:
        """One work order as this device shows it (pending edits applied), or None."""
        return self.cache.get(entity_id)

    def work_orders(
        self,
        *,
        search: str = "",
        status: str | None = None,
        include_deleted: bool = False,
        scope: ListScope = "all",
        limit: int = 200,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """A page of the list, by title (`WorkOrderCache.query`)."""
        return self.cache.query(
            search=search,
            status=status,
            include_deleted=include_deleted,
            scope=scope,
            limit=limit,
            offset=offset,
        )

    def count_work_orders(
        self,
        *,
        search: str = "",
        status: str | None = None,
        include_deleted: bool = False,
        scope: ListScope = "all",
    ) -> int:
        return self.cache.count(
            search=search, status=status, include_deleted=include_deleted, scope=scope
        )

    def held_here(self, entity_ids: list[str]) -> list[str]:
        """Which of ``entity_ids`` this device holds, in their order."""
        with storage_errors(self.path):
            return self.cache.existing(entity_ids)

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one SELECT on this thread's connection; a known SQLite condition
        (busy, disk, unreadable) is raised as its StoreError. Blocking: on the executor."""
        with storage_errors(self.path):
            rows: list[tuple[Any, ...]] = connection(self.db).execute(sql, params).fetchall()
        return rows

    def read_one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of one SELECT (None: no row), as `read`."""
        with storage_errors(self.path):
            row: tuple[Any, ...] | None = connection(self.db).execute(sql, params).fetchone()
        return row

    def stats(self) -> dict[str, Any]:
        with storage_errors(self.path):
            return queue_stats(self.db, self.path, self.clock())


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return format_validation_error(exc)
    return str(exc)
