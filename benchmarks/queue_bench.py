"""Queue benchmark: fieldsync's store against raw sqlite3 and peer queues at equal durability.

Every figure is the median of several runs, each in a fresh temp dir, and all systems are
measured side by side in the same process, interleaved run by run so machine noise (fsync
times vary several-fold here) hits them alike. Everything runs with WAL + synchronous=FULL.

    .venv/bin/python benchmarks/queue_bench.py --quick --json bench-results/queue.json

- enqueue: fieldsync ``Store.record_edit`` (cache row + job, one transaction); raw sqlite3
  inserts the same two rows in one transaction; peers ``put`` one item (no cache row).
- claim+ack: one job at a time, claim and ack in separate commits. Raw sqlite3 runs fieldsync's
  own claim statement and ack SQL (done update + attempt-history insert) on a plain connection.
  huey deletes on take (at-most-once, one commit per take): its figure is a take, not
  comparable to claim+ack.
- claim+ack batch 100: one claim statement for 100 jobs, one ack commit (``ack_many``).
- claim latency: median ``JobQueue.claim`` time (µs, one job, acked after each claim) on tables
  of N jobs of which all but 100 are done, built with synchronous=OFF and reopened by ``Store``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.records import PAYLOAD_SCHEMA_VERSION
from app.store.db import DB_FILENAME
from app.store.queue import _CLAIM, _INSERT_ATTEMPT, JobQueue, Outcome
from app.store.store import TOPIC_WORK_ORDERS, Store

SYSTEMS = ("fieldsync", "sqlite3", "persist_queue", "huey", "litequeue")
BATCH_SYSTEMS = ("fieldsync", "sqlite3")
LATENCY_SIZES = (1_000, 10_000, 100_000, 1_000_000)
LATENCY_PENDING = 100
LATENCY_WARMUP = 5
MIN_ROUNDS = 5  # chunks per system a phase always takes, whatever the budget
CHUNK = 10  # single ops timed together before the next system takes its turn
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


@dataclass(frozen=True)
class Plan:
    runs: int
    ops: int  # single-op measurements: edits enqueued / jobs claimed+acked per run
    batch_jobs: int  # jobs drained in batches of 100 per run
    warmup: int
    latency_runs: int
    latency_samples: int  # claims timed per size per run (at most LATENCY_PENDING - warmup)
    rebuild_latency_tables: bool  # False: build each size once, copy it into each run's dir
    # Wall-clock budget (s) for the throughput runs and for the whole benchmark: past it, no
    # new run starts once ``min_runs`` are in, and a phase stops after its minimum chunks.
    # None: always the full plan.
    throughput_budget: float | None = None
    total_budget: float | None = None
    min_runs: int = 3


QUICK = Plan(
    runs=5,
    ops=300,
    batch_jobs=1000,
    warmup=20,
    latency_runs=3,
    latency_samples=40,
    rebuild_latency_tables=False,
    throughput_budget=20.0,
    total_budget=40.0,
)
FULL = Plan(
    runs=9,
    ops=1000,
    batch_jobs=3000,
    warmup=50,
    latency_runs=5,
    latency_samples=80,
    rebuild_latency_tables=True,
)


# -- the systems under test -------------------------------------------------------------------


class Subject:
    """One system in one fresh dir: enqueue, claim+ack, and (fieldsync, raw) batched drain."""

    def enqueue(self) -> None:
        raise NotImplementedError

    def claim_ack(self) -> None:
        raise NotImplementedError

    def claim_ack_batch(self, size: int) -> int:
        raise NotImplementedError

    def fill(self, count: int) -> None:
        """Untimed setup for the batch drain: ``count`` jobs written in one transaction."""
        raise NotImplementedError

    def pragmas(self) -> dict[str, Any]:
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

    def claim_ack(self) -> None:
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
        self.conn = sqlite3.connect(root / "raw.sqlite3", isolation_level=None)
        for pragma in ("journal_mode=wal", "synchronous=FULL", "busy_timeout=5000"):
            self.conn.execute(f"PRAGMA {pragma}")
        self.conn.execute("PRAGMA foreign_keys=1")
        for statement in ddl:
            self.conn.execute(statement)
        names = ("id", *FULL_FIELDS, "origin", "local_updated_at")
        self.insert_cache = (
            f"INSERT INTO work_orders ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        )
        self.ack_sql = (
            "UPDATE jobs SET status = 'done', locked_by = NULL, locked_until = NULL, "
            "last_error = NULL, updated_at = ?, finished_at = ? "
            "WHERE id = ? AND status IN ('leased', 'pending')"
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

    def _claim(self, limit: int) -> tuple[float, list[tuple[Any, ...]]]:
        now = time.time()
        # One statement, its own write transaction: as JobQueue.claim runs it.
        rows = self.conn.execute(_CLAIM, (WORKER, now + 60.0, now, now, limit)).fetchall()
        return now, rows

    def _ack(self, claimed_at: float, rows: list[tuple[Any, ...]]) -> int:
        now = time.time()
        conn = self.conn
        changed = 0
        conn.execute("BEGIN IMMEDIATE")
        for row in rows:
            if conn.execute(self.ack_sql, (now, now, row[0])).rowcount:
                changed += 1
                duration = (now - claimed_at) * 1000.0
                conn.execute(_INSERT_ATTEMPT, (row[0], claimed_at, duration, "done", None, None))
        conn.execute("COMMIT")
        return changed

    def claim_ack(self) -> None:
        claimed_at, rows = self._claim(1)
        assert len(rows) == 1
        self._ack(claimed_at, rows)

    def claim_ack_batch(self, size: int) -> int:
        return self._ack(*self._claim(size))

    def pragmas(self) -> dict[str, Any]:
        return read_pragmas(self.conn)

    def close(self) -> None:
        self.conn.close()


class PersistQueue(Subject):
    """persist-queue's SQLiteAckQueue: get marks the row unacked (commit), ack marks it acked."""

    def __init__(self, root: Path, *, equalize: bool = True) -> None:
        import persistqueue

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

    def close(self) -> None:
        self.queue.close()


class Huey(Subject):
    """huey's SqliteHuey storage: dequeue deletes the row in the take's commit."""

    def __init__(self, root: Path, *, equalize: bool = True) -> None:
        from huey import SqliteHuey

        self.huey = SqliteHuey(filename=str(root / "huey.db"), fsync=True if equalize else None)
        self.storage = self.huey.storage
        self.body = json.dumps(PAYLOAD).encode()

    def enqueue(self) -> None:
        self.storage.enqueue(self.body)

    def claim_ack(self) -> None:
        assert self.storage.dequeue() is not None

    def pragmas(self) -> dict[str, Any]:
        return read_pragmas(self.storage.conn)

    def close(self) -> None:
        self.storage.close()


class LiteQueue(Subject):
    """litequeue: pop locks the row (UPDATE ... RETURNING, commit), done marks it (commit)."""

    def __init__(self, root: Path, *, equalize: bool = True) -> None:
        from litequeue import LiteQueue as Queue

        self.queue = Queue(str(root / "litequeue.db"))
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


def interleaved(
    actions: dict[str, Callable[[], object]],
    rounds: int,
    per_chunk: int,
    deadline: float = float("inf"),
) -> tuple[dict[str, float], int]:
    """Ops/s of each action, timed in small chunks taken in turn (rotating who goes first),
    so a burst of machine noise lands on every system alike; the median chunk decides.
    Also returns how many rounds ran (fewer than ``rounds`` once past ``deadline``)."""
    names = list(actions)
    chunks: dict[str, list[float]] = {name: [] for name in names}
    for turn in range(rounds):
        shift = turn % len(names)
        for name in names[shift:] + names[:shift]:
            action = actions[name]
            start = time.perf_counter()
            for _ in range(per_chunk):
                action()
            chunks[name].append(time.perf_counter() - start)
        if turn + 1 >= MIN_ROUNDS and time.perf_counter() > deadline:
            break
    rates = {name: per_chunk / statistics.median(times) for name, times in chunks.items()}
    return rates, len(chunks[names[0]])


def full_batch(subject: Subject) -> None:
    changed = subject.claim_ack_batch(100)
    assert changed == 100, changed


def run_throughput(plan: Plan, ddl: list[str]) -> dict[str, dict[str, list[float]]]:
    """Each run opens every system in its own fresh temp dir and measures them side by side."""
    samples: dict[str, dict[str, list[float]]] = {
        "enqueue": {name: [] for name in SYSTEMS},
        "claim_ack": {name: [] for name in SYSTEMS},
        "claim_ack_batch100": {name: [] for name in BATCH_SYSTEMS},
    }
    rounds = plan.ops // CHUNK
    began = time.perf_counter()
    budget = plan.throughput_budget or float("inf")
    for run in range(plan.runs):
        if run >= plan.min_runs and time.perf_counter() - began > budget:
            break
        # A phase may overrun only by its minimum chunks; the budget is shared by three phases.
        phase = budget / plan.min_runs / 3
        with contextlib.ExitStack() as stack:
            subjects: dict[str, Subject] = {}
            for name in SYSTEMS:
                root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fsbench-")))
                subjects[name] = make_subject(name, root, ddl)
                stack.callback(subjects[name].close)
            for subject in subjects.values():
                for _ in range(plan.warmup):
                    subject.enqueue()
                for _ in range(plan.warmup):
                    subject.claim_ack()
            enqueue = {name: subject.enqueue for name, subject in subjects.items()}
            deadline = time.perf_counter() + phase
            rates, enqueued = interleaved(enqueue, rounds, CHUNK, deadline)
            for name, value in rates.items():
                samples["enqueue"][name].append(value)
            claim_ack = {name: subject.claim_ack for name, subject in subjects.items()}
            deadline = time.perf_counter() + phase
            # Claim no more jobs than were enqueued (the warm-up claims took the warm-up jobs).
            rates, _ = interleaved(claim_ack, enqueued, CHUNK, deadline)
            for name, value in rates.items():
                samples["claim_ack"][name].append(value)
            batched = {name: subjects[name] for name in BATCH_SYSTEMS}
            for subject in batched.values():
                subject.fill(plan.batch_jobs)
            batch = {name: functools.partial(full_batch, s) for name, s in batched.items()}
            deadline = time.perf_counter() + phase
            rates, _ = interleaved(batch, plan.batch_jobs // 100, 1, deadline)
            for name, value in rates.items():
                samples["claim_ack_batch100"][name].append(value * 100)
        print(f"  throughput run {run + 1}/{plan.runs} done", file=sys.stderr)
    return samples


def peer_default_pragmas() -> dict[str, dict[str, Any]]:
    found = {}
    for name, peer in (("persist_queue", PersistQueue), ("huey", Huey), ("litequeue", LiteQueue)):
        with tempfile.TemporaryDirectory(prefix=f"fsbench-{name}-") as tmp:
            subject = peer(Path(tmp), equalize=False)
            found[name] = subject.pragmas()
            subject.close()
    return found


# -- claim latency on big, mostly-done tables -------------------------------------------------


def build_latency_db(root: Path, size: int) -> Path:
    """``size`` jobs, all done but the last LATENCY_PENDING; synchronous=OFF while building."""
    Store(root).close()  # the real schema, indexes and schema version
    conn = sqlite3.connect(root / DB_FILENAME, isolation_level=None)
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    indexes = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs' "
        "AND sql IS NOT NULL"
    ).fetchall()
    now = time.time()
    body = json.dumps(PAYLOAD, separators=(",", ":"))
    done = size - LATENCY_PENDING

    def rows() -> Iterator[tuple[Any, ...]]:
        for i in range(size):
            is_done = i < done
            entity = f"{i // 3:08x}-0000-4000-8000-{i % 3:012x}" if is_done else str(uuid.uuid4())
            created = now - 86_400.0 + i * 0.01
            yield (
                i + 1,
                TOPIC_WORK_ORDERS,
                body,
                PAYLOAD_SCHEMA_VERSION,
                f"{i:08x}-1111-4000-8000-{size:012x}",
                entity,
                100,
                "done" if is_done else "pending",
                1 if is_done else 0,
                created,
                f"{i:08x}-2222-4000-8000-{size:012x}",
                created,
                created + 1.0 if is_done else created,
                created + 1.0 if is_done else None,
            )

    conn.execute("BEGIN")
    for name, _ in indexes:
        conn.execute(f"DROP INDEX {name}")
    conn.executemany(
        "INSERT INTO jobs (id, topic, payload, payload_version, idempotency_key, entity_key, "
        "chained, priority, status, attempt_count, next_attempt_at, correlation_id, created_at, "
        "updated_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows(),
    )
    for _, sql in indexes:
        conn.execute(sql)
    conn.execute("COMMIT")  # no ANALYZE: the device never runs it, so neither does this
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    return root / DB_FILENAME


def timed_claim(queue: JobQueue) -> float:
    """One claim (timed, µs) and its ack (not timed)."""
    start = time.perf_counter()
    (job,) = queue.claim(WORKER, 1)
    elapsed = time.perf_counter() - start
    queue.ack(job)
    return elapsed * 1e6


def run_latency(plan: Plan, began: float) -> dict[str, list[float]]:
    """Each run copies (or builds) every table size into fresh dirs, opens them all with the
    real pragmas and claims from them in turn, so noise lands on every size alike."""
    samples: dict[str, list[float]] = {str(size): [] for size in LATENCY_SIZES}
    with tempfile.TemporaryDirectory(prefix="fsbench-templates-") as templates:
        cached: dict[int, Path] = {}
        budget = plan.total_budget or float("inf")
        for run in range(plan.latency_runs):
            if run >= 2 and time.perf_counter() - began > budget:
                break
            with contextlib.ExitStack() as stack:
                queues: dict[int, JobQueue] = {}
                for size in LATENCY_SIZES:
                    root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fsb-")))
                    if plan.rebuild_latency_tables:
                        build_latency_db(root, size)
                    else:
                        if size not in cached:
                            template = Path(templates) / str(size)
                            template.mkdir()
                            cached[size] = build_latency_db(template, size)
                        shutil.copyfile(cached[size], root / DB_FILENAME)
                    store = stack.enter_context(Store(root))
                    queues[size] = store.queue
                for queue in queues.values():
                    for _ in range(LATENCY_WARMUP):
                        timed_claim(queue)
                times: dict[int, list[float]] = {size: [] for size in LATENCY_SIZES}
                for turn in range(plan.latency_samples):
                    shift = turn % len(LATENCY_SIZES)
                    for size in LATENCY_SIZES[shift:] + LATENCY_SIZES[:shift]:
                        times[size].append(timed_claim(queues[size]))
                for size, values in times.items():
                    samples[str(size)].append(statistics.median(values))
            print(f"  latency run {run + 1}/{plan.latency_runs} done", file=sys.stderr)
    return samples


# -- report -----------------------------------------------------------------------------------


def medians(samples: dict[str, list[float]]) -> dict[str, float]:
    return {name: round(statistics.median(values), 1) for name, values in samples.items()}


def targets(result: dict[str, Any]) -> list[tuple[str, str, bool]]:
    enq, ca = result["enqueue"], result["claim_ack"]
    batch, lat = result["claim_ack_batch100"], result["claim_latency_us"]
    peers = ("persist_queue", "huey", "litequeue")
    comparable = ("persist_queue", "litequeue")  # huey's take is not a claim+ack
    return [
        (
            "enqueue >= 80% of raw sqlite3",
            f"{enq['fieldsync'] / enq['sqlite3']:.0%}",
            enq["fieldsync"] >= 0.8 * enq["sqlite3"],
        ),
        (
            "single claim+ack >= 80% of raw sqlite3",
            f"{ca['fieldsync'] / ca['sqlite3']:.0%}",
            ca["fieldsync"] >= 0.8 * ca["sqlite3"],
        ),
        (
            "batch-100 claim+ack >= 10x single",
            f"{batch['fieldsync'] / ca['fieldsync']:.1f}x",
            batch["fieldsync"] >= 10 * ca["fieldsync"],
        ),
        (
            "enqueue ahead of every peer",
            ", ".join(f"{enq['fieldsync'] / enq[p]:.2f}x {p}" for p in peers),
            all(enq["fieldsync"] > enq[p] for p in peers),
        ),
        (
            "claim+ack ahead of every comparable peer",
            ", ".join(f"{ca['fieldsync'] / ca[p]:.2f}x {p}" for p in comparable),
            all(ca["fieldsync"] > ca[p] for p in comparable),
        ),
        (
            "1M-row claim latency <= 1.5x the 1k-row one",
            f"{lat['1000000'] / lat['1000']:.2f}x",
            lat["1000000"] <= 1.5 * lat["1000"],
        ),
    ]


def print_report(result: dict[str, Any], plan: Plan, mode: str, counts: tuple[int, int]) -> None:
    enq, ca, batch = result["enqueue"], result["claim_ack"], result["claim_ack_batch100"]
    pragmas = result["pragmas"]
    runs, latency_runs = counts
    print(
        f"\nQueue benchmark ({mode}): ops/s, medians of {runs} runs, each run with every "
        f"system in its own fresh temp dir,\ntimed side by side in interleaved chunks of {CHUNK} "
        f"(up to {plan.ops} ops per system per run). All run at WAL + synchronous=FULL.\n"
    )
    header = (
        f"{'system':<14}{'enqueue/s':>11}{'vs raw':>8}{'claim+ack/s':>13}{'vs raw':>8}"
        f"{'batch100/s':>12}{'vs raw':>8}  {'delete on take':<20}own default pragmas"
    )
    print(header)
    print("-" * len(header))
    for name in SYSTEMS:
        info = pragmas[name]
        default = info.get("default", info.get("benchmarked"))
        default_text = f"{default['journal_mode']}, synchronous={default['synchronous']}"
        if name == "sqlite3":
            default_text = "(set to fieldsync's)"
        if name in BATCH_SYSTEMS:
            batch_text = f"{batch[name]:>12,.0f}{batch[name] / batch['sqlite3']:>8.0%}"
        else:
            batch_text = f"{'-':>12}{'':>8}"
        claim_text = f"{ca[name]:>13,.0f}{ca[name] / ca['sqlite3']:>8.0%}"
        if name == "huey":
            claim_text = f"{ca[name]:>12,.0f}*{'n/c':>8}"
        take = "yes (at-most-once)" if info.get("delete_on_take") else "no"
        print(
            f"{name:<14}{enq[name]:>11,.0f}{enq[name] / enq['sqlite3']:>8.0%}{claim_text}"
            f"{batch_text}  {take:<20}{default_text}"
        )
    print(
        "* huey: a take (dequeue deletes the row, one commit): at-most-once, not comparable to "
        "claim+ack (n/c).\n  Peers' enqueue writes only the queue item; fieldsync and raw "
        "sqlite3 also write the cached work order."
    )
    lat = result["claim_latency_us"]
    print(
        f"\nClaim latency (JobQueue.claim of one job, µs, median of {latency_runs} runs x "
        f"{plan.latency_samples} claims; all rows done but {LATENCY_PENDING})"
    )
    for size in LATENCY_SIZES:
        print(f"  {size:>9,} rows  {lat[str(size)]:>8,.0f} µs  {lat[str(size)] / lat['1000']:.2f}x")
    print("\nTargets")
    for label, figure, met in targets(result):
        print(f"  [{'met ' if met else 'MISS'}] {label:<44} {figure}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs; under a minute")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the medians as JSON")
    parser.add_argument("--verbose", action="store_true", help="print every run's figure")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    began = time.perf_counter()
    ddl = schema_ddl()
    defaults = peer_default_pragmas()
    throughput = run_throughput(plan, ddl)
    latency = run_latency(plan, began)
    if args.verbose:
        for kind, per_system in throughput.items():
            for name, values in per_system.items():
                print(f"  {kind:<20}{name:<15}" + " ".join(f"{v:8.0f}" for v in values))
        for size, values in latency.items():
            print(f"  {'claim_latency_us':<20}{size:<15}" + " ".join(f"{v:8.0f}" for v in values))

    probe: dict[str, dict[str, Any]] = {}
    for name in SYSTEMS:
        with tempfile.TemporaryDirectory(prefix=f"fsbench-{name}-") as tmp:
            subject = make_subject(name, Path(tmp), ddl)
            probe[name] = subject.pragmas()
            subject.close()
    pragmas: dict[str, Any] = {
        "fieldsync": {"benchmarked": probe["fieldsync"], "default": probe["fieldsync"]},
        "sqlite3": {"benchmarked": probe["sqlite3"], "note": "same schema, pragmas and SQL"},
    }
    for name, notes in PEER_NOTES.items():
        pragmas[name] = {"default": defaults[name], "benchmarked": probe[name], **notes}
    result = {
        "enqueue": medians(throughput["enqueue"]),
        "claim_ack": medians(throughput["claim_ack"]),
        "claim_ack_batch100": medians(throughput["claim_ack_batch100"]),
        "claim_latency_us": medians(latency),
        "pragmas": pragmas,
    }
    counts = (len(throughput["enqueue"]["fieldsync"]), len(latency["1000"]))
    print_report(result, plan, "quick" if args.quick else "full", counts)
    print(f"\n({time.perf_counter() - began:.1f} s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
