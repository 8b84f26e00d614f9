"""The ceiling of `server_bench.py`: the rows the server writes for N creates, through the bare
DB-API cursor, in the transactions the server's store commits them in.

For each mutation (each 100 for the batch endpoint's figure), exactly as the server's store
does now, into a second database of the same schema (`open_store`: its tables, indexes and
SQLite pragmas):

1. the claim: one transaction inserting the `processing` idempotency row(s)
   (`… ON CONFLICT DO NOTHING RETURNING`, the unique (device, key) index deciding);
2. the effect: one transaction that takes its change numbers as `Store.write_transaction`
   does (PostgreSQL: the shared scope-change advisory lock and `pg_current_xact_id()`, numbers
   `base + xid × 2^24 + i`, no shared row; SQLite: the `change_counter` row, read then
   advanced), inserts the work order(s), each one's scope entry (its creator's key, as
   `server.scope.keys.restamp_changed` writes it), each one's change-log row
   (`work_order_change`, as `server.records.history.write_log` writes it), and marks the
   idempotency row(s) `done` with the stored reply (the reply and the log entry encoded
   with the server's own encoders, `stored_json` and `fields_json`: the same text).

No HTTP, no authentication, no validation, no reads back: what a hand-written program that
knew every create was new would send.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from app.records import validate_create
from server.db.claims import stored_json
from server.db.store import BLOCK, Store, open_store
from server.records.batch import RECORD_COLUMNS
from server.records.history import LOG_COLUMNS, created_fields, fields_json
from server.records.mutations import now_iso, record_columns_json

__all__ = ["RawWriter", "work_orders_in"]

#: The advisory lock every PostgreSQL writer holds shared (server/db/store.py).
_SCOPE_LOCK = 0x46534353


def work_orders_in(store: Store) -> int:
    """How many work orders `store` holds (the server's, the raw writer's or the floor's)."""
    table = store.tables.WorkOrder._meta.table_name
    # fetchall: the statement ends here, so no read transaction of the bench's stays open
    # under the server's writes (it would hold back SQLite's WAL checkpoints).
    [(count,)] = store.db.execute_sql(f'SELECT COUNT(*) FROM "{table}"').fetchall()
    return int(count)


class RawWriter:
    """The server's writes for `count` creates, `per_commit` per pair of transactions."""

    DEVICE_ID = 1
    #: The bench device's person, who creates every work order (`provision_device`'s default).
    CREATOR = "bench"

    def __init__(self, db_url: str, fields: dict[str, Any]) -> None:
        self.store: Store = open_store(db_url)  # the server's tables, indexes and pragmas
        tables = self.store.tables
        self.keys = f'"{tables.IdempotencyKey._meta.table_name}"'
        self.records = f'"{tables.WorkOrder._meta.table_name}"'
        self.counter = f'"{tables.ChangeCounter._meta.table_name}"'
        self.scope = f'"{tables.ScopeEntry._meta.table_name}"'
        self.log = f'"{tables.WorkOrderChange._meta.table_name}"'
        self.fields = validate_create(fields)
        self.base = self.store.base()

    def close(self) -> None:
        self.store.close()

    def rate(self, count: int, per_commit: int) -> float:
        groups = [
            [(str(uuid.uuid4()), str(uuid.uuid4())) for _ in range(min(per_commit, count - at))]
            for at in range(0, count, per_commit)
        ]
        started = time.perf_counter()
        for group in groups:
            self.write(group)
        return count / (time.perf_counter() - started)

    def level_with(self, rows: int, per_commit: int) -> int:
        """Untimed: write creates until its database holds `rows` work orders, so that it is
        measured on tables as large as those of the server it is compared with (an insert
        into random-key indexes costs more the larger they are). Returns how many it wrote."""
        missing = rows - work_orders_in(self.store)
        for at in range(0, max(missing, 0), per_commit):
            count = min(per_commit, missing - at)
            self.write([(str(uuid.uuid4()), str(uuid.uuid4())) for _ in range(count)])
        return max(missing, 0)

    def _execute_rows(self, cursor: Any, head: str, rows: list[tuple[Any, ...]]) -> None:
        """`head VALUES (…), (…)` for `rows`, in statements of at most 999 parameters."""
        width = len(rows[0])
        size = self.store.rows_per_statement(width)
        for at in range(0, len(rows), size):
            chunk = rows[at : at + size]
            cursor.execute(
                f"{head} VALUES {self.store.values_list(len(chunk), width)}",
                [value for row in chunk for value in row],
            )

    def write(self, group: list[tuple[str, str]]) -> list[str]:
        """The server's two transactions for creates of (idempotency key, entity id); the
        replies stored, as JSON text, in order."""
        db, store, param = self.store.db, self.store, self.store.db.param
        now = time.time()
        token = uuid.uuid4().hex
        claim_columns = '"device_id", "key", "request_hash", "state", "claim_token", ' + (
            '"claimed_at", "created_at"'
        )
        with db.atomic():
            cursor = db.cursor()
            claims: list[Any] = []
            for key, _ in group:
                claims += [self.DEVICE_ID, key, "0" * 64, "processing", token, now, now]
            cursor.execute(
                f"INSERT INTO {self.keys} ({claim_columns}) VALUES "
                f"{store.values_list(len(group), 7)} ON CONFLICT DO NOTHING "
                'RETURNING "key", "id"',
                claims,
            )
            row_ids = dict(cursor.fetchall())
        with db.atomic():
            cursor = db.cursor()
            if store.is_postgres:
                cursor.execute(
                    "SELECT pg_advisory_xact_lock_shared(%s), pg_current_xact_id()::text",
                    [_SCOPE_LOCK],
                )
                seq = self.base + int(cursor.fetchone()[1]) * BLOCK
            else:
                cursor.execute(
                    f'SELECT "value" FROM {self.counter} WHERE "name" = {param}', ["changes"]
                )
                seq = int(cursor.fetchone()[0])
            records, done, log, scope = [], [], [], []
            at = now_iso()
            for key, entity_id in group:
                seq += 1
                record = {
                    **self.fields, "id": entity_id, "version": 1, "updated_at": at,
                    "updated_by": "bench", "seq": seq, "created_by": self.CREATOR,
                }  # fmt: skip
                records.append(tuple(record[name] for name in RECORD_COLUMNS))
                scope.append((f"u:{self.CREATOR}", entity_id, seq, True))
                body = stored_json({"record": record_columns_json(record)})
                done.append((row_ids[key], token, 201, body))
                fields = fields_json(created_fields(record))
                log.append((entity_id, 1, at, self.DEVICE_ID, "bench", self.CREATOR, "device",
                            "create", fields))  # fmt: skip
            names = ", ".join(f'"{name}"' for name in RECORD_COLUMNS)
            self._execute_rows(cursor, f"INSERT INTO {self.records} ({names})", records)
            self._execute_rows(
                cursor, f'INSERT INTO {self.scope} ("key", "entity_id", "seq", "present")', scope
            )
            log_names = ", ".join(f'"{name}"' for name in LOG_COLUMNS)
            self._execute_rows(cursor, f"INSERT INTO {self.log} ({log_names})", log)
            self._mark_done(cursor, done)
            if not store.is_postgres:
                cursor.execute(
                    f'UPDATE {self.counter} SET "value" = {param} WHERE "name" = {param}',
                    [seq, "changes"],
                )
        return [body for _, _, _, body in done]

    def _mark_done(self, cursor: Any, done: list[tuple[int, str, int, str]]) -> None:
        param = self.store.db.param
        if len(done) == 1:  # the single endpoint's statement
            row_id, token, status, body = done[0]
            cursor.execute(
                f'UPDATE {self.keys} SET "state" = {param}, "status_code" = {param}, '
                f'"response_body" = {param} WHERE "id" = {param} AND "claim_token" = {param} '
                f'AND "state" = {param}',
                ["done", status, body, row_id, token, "processing"],
            )
            return
        columns = ("id", "claim_token", "status_code", "response_body")
        size = self.store.rows_per_statement(len(columns))
        for at in range(0, len(done), size):
            chunk = done[at : at + size]
            cursor.execute(
                f'UPDATE {self.keys} SET "state" = {param}, "status_code" = v."status_code", '
                f'"response_body" = v."response_body" FROM '
                f"{self.store.values_table(columns, len(chunk))} AS v "
                f'WHERE {self.keys}."id" = v."id" AND {self.keys}."claim_token" = v."claim_token"'
                f' AND {self.keys}."state" = {param}',
                ["done", *(value for row in chunk for value in row), "processing"],
            )
