"""Queue benchmark: fieldsync's store against raw sqlite3 and peer queues at equal durability.

Every figure is the median of several runs, each in a fresh temp dir, and all systems are
measured side by side in the same process, interleaved run by run so machine noise (fsync
times vary several-fold here) hits them alike. Everything runs with WAL + synchronous=FULL.

    .venv/bin/python benchmarks/queue_bench.py --quick --json /tmp/queue.json
    .venv/bin/python benchmarks/queue_bench.py --json   # benchmarks/results/queue_bench.json

- enqueue (an edit): fieldsync ``Store.record_edit`` (cache row + job, one transaction); raw
  sqlite3 inserts the same two rows in one transaction; peers ``put`` one item (no cache row).
- enqueue_job_only: ``JobQueue.enqueue`` alone (a fresh idempotency key, the per-entity order
  lookup), against a peer's put; raw sqlite3 runs the same statement.
- claim_ack: one job at a time, claim and ack in separate commits. Raw sqlite3 runs fieldsync's
  own claim statement and ack SQL (done update + attempt-history insert) on a plain connection.
  Fieldsync (and so raw sqlite3) commits the claim without an fsync (synchronous=NORMAL for
  that statement: a lease forgotten by a power cut is a lease expired, the job is sent again
  under its key) and fsyncs the ack, which covers the claim; the peers fsync both.
- claim_ack_full: the same with the claim committed at FULL too (inside a write transaction),
  so fieldsync and the peers pay the same fsyncs. huey deletes on take (at-most-once, one
  commit per take): its figure is a take, not comparable to claim+ack.
- claim+ack batch 100: one claim statement for 100 jobs, one ack commit (``ack_many``).
- WAL pages per operation: the pages one operation of each phase appends to the write-ahead log,
  counted from the WAL's size over a few dozen operations. It does not depend on the machine:
  it is the page writes each commit costs, which decide the ranking when fsyncs are fast.
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

from queue_subjects import (  # a sibling script module
    PAYLOAD,
    PEER_NOTES,
    WORKER,
    Huey,
    LiteQueue,
    PersistQueue,
    Subject,
    make_subject,
    schema_ddl,
)
from results_file import SMOKE_HELP, add_json_option, run_mode, write_results

from app.records import PAYLOAD_SCHEMA_VERSION
from app.store.db import DB_FILENAME
from app.store.queue import JobQueue
from app.store.store import TOPIC_WORK_ORDERS, Store

SYSTEMS = ("fieldsync", "sqlite3", "persist_queue", "huey", "litequeue")
PEERS = ("persist_queue", "huey", "litequeue")
COMPARABLE_PEERS = ("persist_queue", "litequeue")  # huey's take is not a claim+ack
# Single-op phases in the order they run, each a Subject method of the same name; a claim
# phase takes the jobs the phase named in CLAIMS_FROM wrote.
SINGLE_PHASES = ("enqueue", "enqueue_job_only", "claim_ack", "claim_ack_full")
CLAIMS_FROM = {"claim_ack": "enqueue", "claim_ack_full": "enqueue_job_only"}
BATCH_SYSTEMS = ("fieldsync", "sqlite3")
LATENCY_SIZES = (1_000, 10_000, 100_000, 1_000_000)
LATENCY_PENDING = 100
LATENCY_WARMUP = 5
FRAME_OPS = 40  # operations whose WAL pages are counted (well under the 1000-page checkpoint)
WAL_HEADER, FRAME_HEADER = 32, 24
MIN_ROUNDS = 5  # chunks per system a phase always takes, whatever the budget
CHUNK = 10  # single ops timed together before the next system takes its turn
#: The code these figures depend on: report.py --check fails once it changes after the
#: commit a results file measured (benchmarks/staleness.py).
MEASURES = ("benchmarks/queue_bench.py", "benchmarks/queue_subjects.py", "app/store/")
RESULTS_NAME = "queue_bench"


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
    #: Queue sizes of the claim-latency run (the target compares the largest with 1,000).
    latency_sizes: tuple[int, ...] = LATENCY_SIZES


QUICK = Plan(
    runs=5,
    ops=300,
    batch_jobs=1000,
    warmup=20,
    latency_runs=3,
    latency_samples=40,
    rebuild_latency_tables=False,
    throughput_budget=30.0,
    total_budget=50.0,
)
SMOKE = Plan(
    runs=1,
    ops=CHUNK * 2,
    batch_jobs=200,
    warmup=5,
    latency_runs=1,
    latency_samples=5,
    rebuild_latency_tables=False,
    min_runs=1,
    latency_sizes=(1_000, 10_000),
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
    """Each run opens every system in its own fresh temp dir and measures them side by side,
    phase by phase: edits, jobs alone, claim+ack, claim+ack at FULL, batches."""
    samples: dict[str, dict[str, list[float]]] = {
        kind: {name: [] for name in SYSTEMS} for kind in SINGLE_PHASES
    }
    samples["claim_ack_batch100"] = {name: [] for name in BATCH_SYSTEMS}
    rounds = plan.ops // CHUNK
    began = time.perf_counter()
    budget = plan.throughput_budget or float("inf")
    for run in range(plan.runs):
        if run >= plan.min_runs and time.perf_counter() - began > budget:
            break
        # A phase may overrun only by its minimum chunks; the budget is shared by the phases.
        phase = budget / plan.min_runs / (len(SINGLE_PHASES) + 1)
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
            ran: dict[str, int] = {}
            for kind in SINGLE_PHASES:
                actions = {name: getattr(subject, kind) for name, subject in subjects.items()}
                # A claim phase claims no more jobs than its enqueue phase wrote (the warm-up
                # claims took the warm-up jobs), so no claim ever finds the queue empty.
                limit = ran[CLAIMS_FROM[kind]] if kind in CLAIMS_FROM else rounds
                deadline = time.perf_counter() + phase
                rates, ran[kind] = interleaved(actions, limit, CHUNK, deadline)
                for name, value in rates.items():
                    samples[kind][name].append(value)
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


def wal_pages(subject: Subject, op: Callable[[], object]) -> float:
    """WAL pages one ``op`` appends, averaged over FRAME_OPS: the WAL is emptied (checkpoint
    TRUNCATE from a second connection), then its size after the ops gives the frames."""
    path = subject.database()
    wal = path.with_name(path.name + "-wal")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy or wal.stat().st_size != 0:
        raise RuntimeError(f"could not empty {wal} before counting its pages")
    for _ in range(FRAME_OPS):
        op()
    frames = (wal.stat().st_size - WAL_HEADER) / (page_size + FRAME_HEADER)
    if frames >= 900:  # near the auto-checkpoint, which restarts the WAL: the count is wrong
        raise RuntimeError(f"{frames:.0f} WAL frames for {FRAME_OPS} ops: too many to count")
    return round(frames / FRAME_OPS, 2)


def run_wal_pages(ddl: list[str], warmup: int) -> dict[str, dict[str, float]]:
    pages: dict[str, dict[str, float]] = {kind: {} for kind in SINGLE_PHASES}
    for name in SYSTEMS:
        with tempfile.TemporaryDirectory(prefix=f"fsbench-{name}-") as tmp:
            subject = make_subject(name, Path(tmp), ddl)
            try:
                for _ in range(warmup):
                    subject.enqueue()
                    subject.claim_ack()
                for kind in SINGLE_PHASES:  # each claim phase claims what the one before wrote
                    pages[kind][name] = wal_pages(subject, getattr(subject, kind))
            finally:
                subject.close()
    return pages


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
    sizes = plan.latency_sizes
    samples: dict[str, list[float]] = {str(size): [] for size in sizes}
    with tempfile.TemporaryDirectory(prefix="fsbench-templates-") as templates:
        cached: dict[int, Path] = {}
        budget = plan.total_budget or float("inf")
        for run in range(plan.latency_runs):
            if run >= 2 and time.perf_counter() - began > budget:
                break
            with contextlib.ExitStack() as stack:
                queues: dict[int, JobQueue] = {}
                for size in sizes:
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
                times: dict[int, list[float]] = {size: [] for size in sizes}
                for turn in range(plan.latency_samples):
                    shift = turn % len(sizes)
                    for size in sizes[shift:] + sizes[:shift]:
                        times[size].append(timed_claim(queues[size]))
                for size, values in times.items():
                    samples[str(size)].append(statistics.median(values))
            print(f"  latency run {run + 1}/{plan.latency_runs} done", file=sys.stderr)
    return samples


# -- report -----------------------------------------------------------------------------------


def medians(samples: dict[str, list[float]]) -> dict[str, float]:
    return {name: round(statistics.median(values), 1) for name, values in samples.items()}


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    edit, job = result["enqueue"], result["enqueue_job_only"]
    ca, full = result["claim_ack"], result["claim_ack_full"]
    batch, lat = result["claim_ack_batch100"], result["claim_latency_us"]
    largest = str(max(int(size) for size in lat))
    rows = "1M" if largest == "1000000" else f"{int(largest):,}"
    best = max(PEERS, key=lambda peer: job[peer])
    found = [
        (
            "edit (cache row + job) >= 80% of raw sqlite3 writing the same rows",
            f"{edit['fieldsync'] / edit['sqlite3']:.0%}",
            edit["fieldsync"] >= 0.8 * edit["sqlite3"],
        ),
        (
            "job-only enqueue >= 0.9x the best peer's put",
            f"{job['fieldsync'] / job[best]:.2f}x {best}",
            job["fieldsync"] >= 0.9 * job[best],
        ),
        (
            "single claim+ack >= 80% of raw sqlite3",
            f"{ca['fieldsync'] / ca['sqlite3']:.0%}",
            ca["fieldsync"] >= 0.8 * ca["sqlite3"],
        ),
        (
            "claim+ack at FULL ahead of persist-queue and litequeue",
            ", ".join(f"{full['fieldsync'] / full[p]:.2f}x {p}" for p in COMPARABLE_PEERS),
            all(full["fieldsync"] > full[p] for p in COMPARABLE_PEERS),
        ),
        (
            "batch-100 claim+ack >= 10x single",
            f"{batch['fieldsync'] / ca['fieldsync']:.1f}x",
            batch["fieldsync"] >= 10 * ca["fieldsync"],
        ),
        (
            f"{rows}-row claim latency <= 1.5x the 1k-row one",
            f"{lat[largest] / lat['1000']:.2f}x",
            lat[largest] <= 1.5 * lat["1000"],
        ),
    ]
    return [{"target": label, "figure": figure, "met": met} for label, figure, met in found]


def print_report(result: dict[str, Any], plan: Plan, mode: str, counts: tuple[int, int]) -> None:
    edit, job = result["enqueue"], result["enqueue_job_only"]
    ca, full, batch = result["claim_ack"], result["claim_ack_full"], result["claim_ack_batch100"]
    pragmas = result["pragmas"]
    runs, latency_runs = counts
    print(
        f"\nQueue benchmark ({mode}): ops/s, medians of {runs} runs, each run with every "
        f"system in its own fresh temp dir,\ntimed side by side in interleaved chunks of {CHUNK} "
        f"(up to {plan.ops} ops per system per run). All run at WAL + synchronous=FULL.\n"
    )
    header = (
        f"{'system':<14}{'edit/s':>9}{'vs raw':>8}{'job/s':>9}{'claim+ack/s':>13}{'vs raw':>8}"
        f"{'at FULL/s':>11}{'batch100/s':>12}  {'delete on take':<20}own default pragmas"
    )
    print(header)
    print("-" * len(header))
    for name in SYSTEMS:
        info = pragmas[name]
        default = info.get("default", info.get("benchmarked"))
        default_text = f"{default['journal_mode']}, synchronous={default['synchronous']}"
        if name == "sqlite3":
            default_text = "(set to fieldsync's)"
        batch_text = f"{batch[name]:>12,.0f}" if name in BATCH_SYSTEMS else f"{'-':>12}"
        claim_text = f"{ca[name]:>13,.0f}{ca[name] / ca['sqlite3']:>8.0%}{full[name]:>11,.0f}"
        if name == "huey":
            claim_text = f"{ca[name]:>12,.0f}*{'n/c':>8}{full[name]:>10,.0f}*"
        take = "yes (at-most-once)" if info.get("delete_on_take") else "no"
        print(
            f"{name:<14}{edit[name]:>9,.0f}{edit[name] / edit['sqlite3']:>8.0%}{job[name]:>9,.0f}"
            f"{claim_text}{batch_text}  {take:<20}{default_text}"
        )
    print(
        "edit: fieldsync and raw sqlite3 write the cached work order and its job; a peer puts "
        "one item (so its edit/s and job/s are the same put, measured in each phase).\n"
        "job: JobQueue.enqueue alone (unique idempotency key, per-entity order lookup).\n"
        "claim+ack: fieldsync and raw sqlite3 commit the claim without an fsync and fsync the "
        "ack; at FULL both commits are fsynced, as the peers' always are.\n"
        "* huey: a take (dequeue deletes the row, one commit): at-most-once, not comparable to "
        "claim+ack (n/c)."
    )
    lat = result["claim_latency_us"]
    print(
        f"\nClaim latency (JobQueue.claim of one job, µs, median of {latency_runs} runs x "
        f"{plan.latency_samples} claims; all rows done but {LATENCY_PENDING})"
    )
    for size in sorted(int(size) for size in lat):
        print(f"  {size:>9,} rows  {lat[str(size)]:>8,.0f} µs  {lat[str(size)] / lat['1000']:.2f}x")
    pages = result["wal_pages_per_op"]
    print(
        f"\nWAL pages written per operation (mean of {FRAME_OPS}; each page is one WAL frame, "
        "each commit one fsync at FULL)"
    )
    for kind in SINGLE_PHASES:
        print(f"  {kind:<17}" + "".join(f"{n} {pages[kind][n]:.1f}   " for n in SYSTEMS))
    print("\nTargets")
    for target in result["targets"]:
        mark = "met " if target["met"] else "MISS"
        print(f"  [{mark}] {target['target']:<66} {target['figure']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs; under a minute")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    add_json_option(parser, RESULTS_NAME)
    parser.add_argument("--verbose", action="store_true", help="print every run's figure")
    args = parser.parse_args(argv)
    mode = run_mode(args)
    plan = {"smoke": SMOKE, "quick": QUICK, "full": FULL}[mode]
    began = time.perf_counter()
    ddl = schema_ddl()
    defaults = peer_default_pragmas()
    throughput = run_throughput(plan, ddl)
    pages = run_wal_pages(ddl, plan.warmup)
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
    counts = (len(throughput["enqueue"]["fieldsync"]), len(latency["1000"]))
    result: dict[str, Any] = {
        "mode": mode,
        "runs": counts[0],
        "latency_runs": counts[1],
        **{kind: medians(per_system) for kind, per_system in throughput.items()},
        "claim_latency_us": medians(latency),
        "pragmas": pragmas,
        "wal_pages_per_op": pages,
    }
    result["targets"] = targets(result)
    print_report(result, plan, mode, counts)
    print(f"\n({time.perf_counter() - began:.1f} s)")
    if args.json:
        print(f"wrote {write_results(RESULTS_NAME, result, args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
