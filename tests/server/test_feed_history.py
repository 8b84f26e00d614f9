"""Writers in two processes, readers paging the feed throughout: a Jepsen-style history check."""

from __future__ import annotations

import multiprocessing
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pytest

from server.db.store import Store, open_store
from server.records.mutations import apply_mutation, validate_mutation
from server.scope.feed import feed_page
from server.scope.keys import Scope, tuples_of
from tests.support.postgres import PostgresCluster

TEAM = "crew"
WRITERS_PER_PROCESS = 4
CREATES_PER_WRITER = 12
PAGE = 7
# An admin reads every work order's own number; a worker of the team reads the team's key.
READERS = (Scope(9001, "office", "", admin=True), Scope(9002, "nobody", TEAM, admin=False))


@dataclass
class Reading:
    """What one reader was served, in order."""

    scope: Scope
    seen: list[str] = field(default_factory=list)
    since: int = 0

    def page(self, store: Store) -> bool:
        """Read the next page; whether the feed said there is more."""
        page = feed_page(store, self.scope, self.since, PAGE)
        self.seen += [change["id"] for change in page["changes"]]
        self.since = int(page["next"])
        return bool(page["has_more"])


def check_history(committed: Sequence[str], readings: Sequence[Reading]) -> list[str]:
    """Every anomaly of the history: a change a reader saw twice, never saw, saw without it
    committing, or saw out of the order of the change numbers (the same for every reader)."""
    anomalies: list[str] = []
    known = set(committed)
    for reading in readings:
        who = f"reader {reading.scope.device_id}"
        counts = Counter(reading.seen)
        anomalies += [f"{who} saw {key} {n} times" for key, n in counts.items() if n > 1]
        anomalies += [f"{who} saw {key}, never committed" for key in counts if key not in known]
        anomalies += [f"{who} never saw {key}" for key in committed if key not in counts]
        if not anomalies and reading.seen != list(committed):
            anomalies.append(f"{who} saw the changes out of order")
    return anomalies


def _create(store: Store, tag: str, delay: float = 0.0) -> str:
    """One work order of the team, committed `delay` seconds after it took its number."""
    entity_id = str(uuid.uuid4())
    mutation = validate_mutation(
        {"op": "create", "entity_id": entity_id, "fields": {"title": tag, "team": TEAM}}
    )
    with store.write_transaction() as sequence:
        reply = apply_mutation(store, mutation, "writer", sequence, creator="writer")
        assert reply.status == 201, reply
        time.sleep(delay)
    return entity_id


def _write(url: str, process: int) -> None:
    """A child process: writers that each create work orders, pausing before each commit."""
    store = open_store(url, create=False)

    def writer(number: int) -> None:
        delays = random.Random(process * 100 + number)
        for item in range(CREATES_PER_WRITER):
            _create(store, f"p{process}-w{number}-{item}", delays.uniform(0, 0.03))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS_PER_PROCESS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _page_until(store: Store, reading: Reading, done: threading.Event) -> None:
    """Page on until `done` is set and a page says there is nothing more."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        finished = done.is_set()  # before the page: every commit precedes it
        if not reading.page(store) and finished:
            return
    raise AssertionError("the feed never settled")


def _committed(store: Store) -> list[str]:
    orders = store.tables.WorkOrder
    return [row[0] for row in tuples_of(orders.select(orders.id).order_by(orders.seq))]


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = open_store(db_url)
    yield opened
    opened.close()


def test_every_reader_sees_every_change_once_in_one_order(db_url: str, store: Store) -> None:
    spawn = multiprocessing.get_context("spawn")
    writers = [spawn.Process(target=_write, args=(db_url, n)) for n in range(2)]
    done = threading.Event()
    readings = [Reading(scope) for scope in READERS]
    readers = [
        threading.Thread(target=_page_until, args=(store, reading, done)) for reading in readings
    ]
    for process in writers:
        process.start()
    for thread in readers:
        thread.start()
    for process in writers:
        process.join(120)
        assert process.exitcode == 0
    done.set()
    for thread in readers:
        thread.join()
    committed = _committed(store)
    assert len(committed) == 2 * WRITERS_PER_PROCESS * CREATES_PER_WRITER
    assert check_history(committed, readings) == []


@pytest.mark.postgres
@pytest.mark.parametrize("horizon", [True, False], ids=["horizon", "naive"])
def test_a_change_that_commits_late_is_not_skipped(
    postgres: PostgresCluster, horizon: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A takes its number, B takes a higher one and commits, a reader pages, A commits: the
    horizon holds B back until A is in; a feed without it (a bare sequence) skips A. (On
    SQLite B cannot start before A commits.)"""
    store = open_store(postgres.create_database(f"late_{horizon}"))
    if not horizon:
        monkeypatch.setattr(Store, "horizon", lambda self: None)
    numbered, release = threading.Event(), threading.Event()
    late: list[str] = []

    def slow_writer() -> None:
        entity_id = str(uuid.uuid4())
        mutation = validate_mutation(
            {"op": "create", "entity_id": entity_id, "fields": {"title": "A", "team": TEAM}}
        )
        with store.write_transaction() as sequence:
            apply_mutation(store, mutation, "writer", sequence, creator="writer")
            late.append(entity_id)
            numbered.set()
            release.wait(30)

    first = threading.Thread(target=slow_writer)
    first.start()
    assert numbered.wait(30)
    _create(store, "B")
    readings = [Reading(scope) for scope in READERS]
    for reading in readings:
        reading.page(store)
    release.set()
    first.join()
    settled = threading.Event()
    settled.set()
    for reading in readings:
        _page_until(store, reading, settled)
    anomalies = check_history(_committed(store), readings)
    store.close()
    if horizon:
        assert anomalies == []
    else:
        assert anomalies == [f"reader {scope.device_id} never saw {late[0]}" for scope in READERS]
