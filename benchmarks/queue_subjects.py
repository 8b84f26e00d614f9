"""The systems the queue benchmark compares: fieldsync, raw sqlite3 and peer queues.

Each is a `Subject` with the same operations (an edit or a put, a job alone or a put,
claim+ack with the claim at NORMAL or at FULL, a batch), set to WAL + synchronous=FULL, with
its own default pragmas recorded beside its figure. A peer has one put and one claim+ack, so
its figure for the job-only enqueue and for claim+ack at FULL is the same operation measured
again, side by side with fieldsync's in that phase.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from app.records import PAYLOAD_SCHEMA_VERSION
from app.store.db import WriteTransaction
from app.store.queue import Outcome
from app.store.statements import ACK_MANY, CLAIM, INSERT_ATTEMPT
from app.store.statements import INSERT_JOB as QUEUE_INSERT_JOB
from app.store.store import TOPIC_WORK_ORDERS, Store

WORKER = "bench-worker"
PRAGMA_NAMES = ("journal_mode", "synchronous", "busy_timeout", "foreign_keys", "cache_size")
SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
FIELDS = {"title": "Replace pump seal", "site": "Depot 4, bay 2", "notes": "Leaks at 3 bar."}
FULL_FIELDS = {
    "title": FIELDS["title"],
    "site": FIELDS["site"],
    "status": "open",
    "priority": "normal",
    "notes": FIELDS["notes"],
    "assignee": "",
    "due_date": None,
    "deleted": False,
}
PAYLOAD = {"op": "create", "fields": FULL_FIELDS}
# The job row the store writes for a create, as a plain INSERT (a new entity is never chained).
INSERT_JOB = (
    "INSERT INTO jobs (topic, payload, payload_version, idempotency_key, entity_key, "
    "base_version, chained, priority, status, attempt_count, next_attempt_at, correlation_id, "
    "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?)"
)


class Subject:
    """One system in one fresh dir: enqueue, claim+ack, and (fieldsync, raw) batched drain."""

    def enqueue(self) -> None:
        """An edit (fieldsync, raw sqlite3: the cached work order and its job) or a put."""
        raise NotImplementedError

    def enqueue_job_only(self) -> None:
        """A job alone, as a peer's put: the queue row and its indexes, nothing else."""
        self.enqueue()

    def claim_ack(self) -> None:
        raise NotImplementedError

    def claim_ack_full(self) -> None:
        """Claim+ack with the claim's commit fsynced too (a peer fsyncs every commit)."""
        self.claim_ack()

    def claim_ack_batch(self, size: int) -> int:
        raise NotImplementedError

    def fill(self, count: int) -> None:
        """Untimed setup for the batch drain: ``count`` jobs written in one transaction."""
        raise NotImplementedError

    def pragmas(self) -> dict[str, Any]:
        raise NotImplementedError

    def database(self) -> Path:
        """The SQLite file this system writes (its WAL is that name plus ``-wal``)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def read_pragmas(conn: sqlite3.Connection) -> dict[str, Any]:
    found = {name: conn.execute(f"PRAGMA {name}").fetchone()[0] for name in PRAGMA_NAMES}
    found["synchronous"] = SYNC_NAMES.get(found["synchronous"], found["synchronous"])
    return found


class Fieldsync(Subject):
    def __init__(self, root: Path) -> None:
        self.store = Store(root)
        self.queue = self.store.queue

    def enqueue(self) -> None:
        self.store.record_edit("create", None, FIELDS)

    def enqueue_job_only(self) -> None:
        # The general path: a fresh idempotency key and the per-entity order lookup (the
        # ``new_entity`` shortcut would skip that lookup).
        self.queue.enqueue(TOPIC_WORK_ORDERS, PAYLOAD, str(uuid.uuid4()))

    def claim_ack(self) -> None:
        (job,) = self.queue.claim(WORKER, 1)
        self.queue.ack(job)

    def claim_ack_full(self) -> None:
        # A claim inside the caller's write transaction commits with it, at the store's
        # synchronous=FULL: two fsyncs per job, as every peer.
        with WriteTransaction(self.store.db, self.store.path):
            (job,) = self.queue.claim(WORKER, 1)
        self.queue.ack(job)

    def fill(self, count: int) -> None:
        with self.store.db.atomic():
            for _ in range(count):
                self.enqueue()

    def claim_ack_batch(self, size: int) -> int:
        jobs = self.queue.claim(WORKER, size)
        outcome = Outcome()
        return self.queue.ack_many([(job, outcome, None) for job in jobs])

    def pragmas(self) -> dict[str, Any]:
        return read_pragmas(self.store.db.connection())

    def database(self) -> Path:
        return self.store.path

    def close(self) -> None:
        self.store.close()


def schema_ddl() -> list[str]:
    """The real schema, read back from a database the store created (tables, then indexes)."""
    with tempfile.TemporaryDirectory(prefix="fsbench-ddl-") as tmp, Store(Path(tmp)) as store:
        rows = store.db.execute_sql(
            "SELECT sql FROM sqlite_master WHERE tbl_name IN ('jobs', 'attempts', 'work_orders') "
            "AND sql IS NOT NULL ORDER BY type = 'index', rowid"
        ).fetchall()
    return [row[0] for row in rows]


class RawSqlite(Subject):
    """The physical reference: the same schema, pragmas and SQL, no library in between."""

    def __init__(self, root: Path, ddl: list[str]) -> None:
        self.path = root / "raw.sqlite3"
        self.conn = sqlite3.connect(self.path, isolation_level=None)
        for pragma in ("journal_mode=wal", "synchronous=FULL", "busy_timeout=5000"):
            self.conn.execute(f"PRAGMA {pragma}")
        self.conn.execute("PRAGMA foreign_keys=1")
        for statement in ddl:
            self.conn.execute(statement)
        names = ("id", *FULL_FIELDS, "origin", "local_updated_at")
        self.insert_cache = (
            f"INSERT INTO work_orders ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        )

    def enqueue(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self._write_edit()
        self.conn.execute("COMMIT")

    def fill(self, count: int) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        for _ in range(count):
            self._write_edit()
        self.conn.execute("COMMIT")

    def _write_edit(self) -> None:
        now = time.time()
        entity_id = str(uuid.uuid4())
        body = json.dumps(PAYLOAD, separators=(",", ":"))
        conn = self.conn
        conn.execute(self.insert_cache, (entity_id, *FULL_FIELDS.values(), "local", now))
        conn.execute(
            INSERT_JOB,
            (
                TOPIC_WORK_ORDERS,
                body,
                PAYLOAD_SCHEMA_VERSION,
                str(uuid.uuid4()),
                entity_id,
                None,
                0,
                100,
                now,
                str(uuid.uuid4()),
                now,
                now,
            ),
        )

    def enqueue_job_only(self) -> None:
        now = time.time()
        body = json.dumps(PAYLOAD, separators=(",", ":"))
        self.conn.execute(
            QUEUE_INSERT_JOB,
            (
                TOPIC_WORK_ORDERS,
                body,
                PAYLOAD_SCHEMA_VERSION,
                str(uuid.uuid4()),
                str(uuid.uuid4()),
                None,
                100,
                now,
                str(uuid.uuid4()),
            ),
        )

    def _claim(self, limit: int) -> tuple[float, list[tuple[Any, ...]]]:
        now = time.time()
        # One statement, its own write transaction, committed without an fsync (the lease is
        # not data; the ack's fsync covers it): as JobQueue.claim runs it.
        self.conn.execute("PRAGMA synchronous=NORMAL")
        rows = self.conn.execute(
            CLAIM, (WORKER, now + 60.0, now, now, TOPIC_WORK_ORDERS, limit)
        ).fetchall()
        self.conn.execute("PRAGMA synchronous=FULL")
        return now, rows

    def claim_ack_full(self) -> None:
        now = time.time()
        self.conn.execute("BEGIN IMMEDIATE")
        rows = self.conn.execute(
            CLAIM, (WORKER, now + 60.0, now, now, TOPIC_WORK_ORDERS, 1)
        ).fetchall()
        self.conn.execute("COMMIT")
        assert len(rows) == 1
        self._ack(now, rows)

    def _ack(self, claimed_at: float, rows: list[tuple[Any, ...]]) -> int:
        now = time.time()
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        ids = json.dumps([row[0] for row in rows])
        done = [job_id for (job_id,) in conn.execute(ACK_MANY, (now, now, ids))]
        duration = (now - claimed_at) * 1000.0
        conn.executemany(
            INSERT_ATTEMPT,
            [
                (job_id, claimed_at, duration, "done", None, None, "success", "applied")
                for job_id in done
            ],
        )
        conn.execute("COMMIT")
        return len(done)

    def claim_ack(self) -> None:
        claimed_at, rows = self._claim(1)
        assert len(rows) == 1
        self._ack(claimed_at, rows)

    def claim_ack_batch(self, size: int) -> int:
        return self._ack(*self._claim(size))

    def pragmas(self) -> dict[str, Any]:
        return read_pragmas(self.conn)

    def database(self) -> Path:
        return self.path

    def close(self) -> None:
        self.conn.close()


class PersistQueue(Subject):
    """persist-queue's SQLiteAckQueue: get marks the row unacked (commit), ack marks it acked."""

    def __init__(self, root: Path, *, equalize: bool = True) -> None:
        import persistqueue

        self.root = root
        self.queue = persistqueue.SQLiteAckQueue(str(root / "pq"), multithreading=False)
        self.conn: sqlite3.Connection = self.queue._putter
        if equalize:
            self.conn.execute("PRAGMA synchronous=FULL")

    def enqueue(self) -> None:
        self.queue.put(PAYLOAD)

    def claim_ack(self) -> None:
        item = self.queue.get(block=False)
        self.queue.ack(item)

    def pragmas(self) -> dict[str, Any]:
        return read_pragmas(self.conn)

    def database(self) -> Path:
        return self.root / "pq" / "data.db"

    def close(self) -> None:
        self.queue.close()


class Huey(Subject):
    """huey's SqliteHuey storage: dequeue deletes the row in the take's commit."""

    def __init__(self, root: Path, *, equalize: bool = True) -> None:
        from huey import SqliteHuey

        self.path = root / "huey.db"
        self.huey = SqliteHuey(filename=str(self.path), fsync=True if equalize else None)
        self.storage = self.huey.storage
        self.body = json.dumps(PAYLOAD).encode()

    def enqueue(self) -> None:
        self.storage.enqueue(self.body)

    def claim_ack(self) -> None:
        assert self.storage.dequeue() is not None

    def pragmas(self) -> dict[str, Any]:
        return read_pragmas(self.storage.conn)

    def database(self) -> Path:
        return self.path

    def close(self) -> None:
        self.storage.close()


class LiteQueue(Subject):
    """litequeue: pop locks the row (UPDATE ... RETURNING, commit), done marks it (commit)."""

    def __init__(self, root: Path, *, equalize: bool = True) -> None:
        from litequeue import LiteQueue as Queue

        self.path = root / "litequeue.db"
        self.queue = Queue(str(self.path))
        if equalize:
            self.queue.conn.execute("PRAGMA synchronous=FULL")
        self.body = json.dumps(PAYLOAD)

    def enqueue(self) -> None:
        self.queue.put(self.body)

    def claim_ack(self) -> None:
        message = self.queue.pop()
        self.queue.done(message.message_id)

    def pragmas(self) -> dict[str, Any]:
        return read_pragmas(self.queue.conn)

    def database(self) -> Path:
        return self.path

    def close(self) -> None:
        self.queue.close()


PEER_NOTES = {
    "persist_queue": {
        "api": "persistqueue.SQLiteAckQueue put / get + ack",
        "equalized_by": "PRAGMA synchronous=FULL on its connection",
        "delete_on_take": False,
    },
    "huey": {
        "api": "SqliteHuey(fsync=True).storage enqueue / dequeue",
        "equalized_by": "fsync=True (synchronous=FULL)",
        "delete_on_take": True,
        "claim_ack": "take only: delete on take, at-most-once, one commit per take; "
        "not comparable to claim+ack",
    },
    "litequeue": {
        "api": "LiteQueue put / pop + done",
        "equalized_by": "PRAGMA synchronous=FULL on its connection",
        "delete_on_take": False,
    },
}


# -- measurement ------------------------------------------------------------------------------


def make_subject(name: str, root: Path, ddl: list[str]) -> Subject:
    if name == "fieldsync":
        return Fieldsync(root)
    if name == "sqlite3":
        return RawSqlite(root, ddl)
    return {"persist_queue": PersistQueue, "huey": Huey, "litequeue": LiteQueue}[name](root)
