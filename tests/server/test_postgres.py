"""PostgreSQL: two `fieldsync-server serve` processes sharing one database."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from server.cli import main
from server.db.store import open_store
from server.embedded import start_server
from server.records.mutations import apply_mutation, validate_mutation
from server.scope.feed import feed_page
from server.scope.keys import Scope
from tests.server.bad_text import check_unrepresentable_input_is_refused_not_a_crash
from tests.server.test_concurrency import (
    batch_pool,
    check_each_key_applied_once,
    classify,
    fire_identical,
    fire_overlapping_batches,
)
from tests.support.api import ServerApi, create_body, read_feed_while
from tests.support.postgres import PostgresCluster
from tests.support.serve import ServerProcess

pytestmark = pytest.mark.postgres

_names = itertools.count()


@pytest.fixture
def pg_url(postgres: PostgresCluster) -> str:
    return postgres.create_database(f"fieldsync_{next(_names)}")


@pytest.fixture
def two_servers(pg_url: str) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    open_store(pg_url).close()  # create the schema once, before both processes start
    # The limiter has its own tests; a busy CI box must not turn polling into 429s here.
    unlimited = ("--rate-limit-per-second", "0")
    with ServerProcess(pg_url, *unlimited) as first, ServerProcess(pg_url, *unlimited) as second:
        yield first, second


def token_for(
    pg_url: str, name: str, capsys: pytest.CaptureFixture[str], role: str = "worker"
) -> str:
    capsys.readouterr()
    assert main(["add-device", "--db", pg_url, "--name", name, "--role", role]) == 0
    return capsys.readouterr().out.splitlines()[-1]


async def test_fifty_identical_requests_across_two_processes_make_one_effect(
    pg_url: str,
    two_servers: tuple[ServerProcess, ServerProcess],
    capsys: pytest.CaptureFixture[str],
) -> None:
    token = token_for(pg_url, "phone-1", capsys)
    urls = [process.base_url for process in two_servers]
    body = create_body()
    kinds = classify(await fire_identical(urls, token, body))
    assert kinds["applied"] == 1
    assert kinds["replayed"] + kinds["in_use"] == 49
    store = open_store(pg_url)
    try:
        assert store.tables.WorkOrder.select().count() == 1
        assert store.tables.IdempotencyKey.select().count() == 1
    finally:
        store.close()


def test_feed_paging_under_concurrent_writes_on_two_processes(
    pg_url: str,
    two_servers: tuple[ServerProcess, ServerProcess],
    capsys: pytest.CaptureFixture[str],
) -> None:
    writers = [
        ServerApi(two_servers[n % 2].base_url, token_for(pg_url, f"writer-{n}", capsys))
        for n in range(6)
    ]
    # The whole organisation's feed: an admin's (a worker's is scoped, tests/server/test_scope.py).
    reader = ServerApi(two_servers[0].base_url, token_for(pg_url, "reader", capsys, "admin"))
    try:
        check_paging(writers, reader)
    finally:
        for api in [*writers, reader]:
            api.close()


def check_paging(writers: list[ServerApi], reader: ServerApi) -> None:
    errors: list[BaseException] = []

    def write(writer: ServerApi, n: int) -> None:
        try:
            for i in range(15):
                if n % 2:
                    items = [{"idempotency_key": f"{n}-{i}-{j}", **create_body()} for j in range(5)]
                    assert writer.batch(items).status_code == 200
                else:
                    record = writer.create()
                    assert writer.update(record["id"], 1, notes="edited").status_code == 200
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(w, n)) for n, w in enumerate(writers)]
    for thread in threads:
        thread.start()
    delivered, seen = read_feed_while(reader, threads, limit=7, pause_s=0.01)
    for thread in threads:
        thread.join()
    assert not errors
    assert len(delivered) == len(set(delivered))
    final = {record["id"]: record["version"] for record in reader.all_changes()}
    assert seen == final
    assert len(final) == 3 * 15 + 3 * 15 * 5


def test_a_late_committing_writer_cannot_be_skipped(pg_url: str) -> None:
    """A second writer does not wait for one holding its transaction open, and the feed
    serves neither until the first commits, then both in the order of their numbers."""
    store = open_store(pg_url)
    other = open_store(pg_url)
    hold = threading.Event()
    first_seq: list[int] = []
    office = Scope(1, "office", "", admin=True)

    def slow_writer() -> None:
        with store.write_transaction() as sequence:
            valid = validate_mutation(create_body(title="slow"))
            apply_mutation(store, valid, "slow", sequence, creator="slow")
            first_seq.append(sequence.last)
            hold.wait(10)

    thread = threading.Thread(target=slow_writer)
    thread.start()
    while not first_seq:
        time.sleep(0.01)
    finished = threading.Event()

    def fast_writer() -> None:
        with other.write_transaction() as sequence:
            apply_mutation(
                other,
                validate_mutation(create_body(title="fast")),
                "fast",
                sequence,
                creator="fast",
            )
        finished.set()

    fast = threading.Thread(target=fast_writer)
    fast.start()
    assert finished.wait(10), "second writer waited for the first"
    table = other.tables.WorkOrder
    assert [row.title for row in table.select()] == ["fast"]
    held_back = feed_page(other, office, 0, 10)
    assert held_back["changes"] == []
    assert held_back["next"] == "0"
    hold.set()
    thread.join()
    fast.join()
    titles = [row.title for row in table.select().order_by(table.seq)]
    assert titles == ["slow", "fast"]
    served = feed_page(other, office, 0, 10)["changes"]
    assert [change["title"] for change in served] == ["slow", "fast"]
    store.close()
    other.close()


def test_contract_basics_on_postgres(pg_url: str) -> None:
    with start_server(pg_url) as server:
        api = ServerApi(server.base_url, server.add_device("phone-1"))
        try:
            record = api.create()
            assert api.update(record["id"], 1, status="done").status_code == 200
            assert api.update(record["id"], 1, status="open").status_code == 409
            body = create_body()
            assert api.mutate(body, key="k").status_code == 201
            assert api.mutate(body, key="k").headers["Idempotent-Replayed"] == "true"
            assert api.mutate(create_body(), key="k").status_code == 422
            etag = api.client.get(f"/v1/records/{record['id']}").headers["ETag"]
            assert etag == '"2"'
            assert len(api.all_changes(limit=1)) == 2
            response = httpx.get(server.base_url + "/healthz")
            assert response.status_code == 200
        finally:
            api.close()


def test_unrepresentable_input_is_refused_on_postgres(pg_url: str) -> None:
    # PostgreSQL cannot store a NUL: a key or a note holding one was a 500 there.
    with start_server(pg_url) as server:
        api = ServerApi(server.base_url, server.add_device("phone-1"))
        try:
            check_unrepresentable_input_is_refused_not_a_crash(api)
        finally:
            api.close()


async def test_overlapping_batches_across_two_processes_apply_each_item_once(
    pg_url: str,
    two_servers: tuple[ServerProcess, ServerProcess],
    capsys: pytest.CaptureFixture[str],
) -> None:
    token = token_for(pg_url, "phone-1", capsys)
    pool = batch_pool()
    answers = await fire_overlapping_batches([p.base_url for p in two_servers], token, pool)
    check_each_key_applied_once(pool, answers)
    store = open_store(pg_url)
    try:
        assert store.tables.WorkOrder.select().count() == len(pool)
        assert store.tables.IdempotencyKey.select().count() == len(pool)
        table = store.tables.WorkOrder
        # One number each; numbers are blocks of the writing transactions' ids, not 1, 2, 3
        # (server/db/store.py), so they tell nothing more.
        assert len({row.seq for row in table.select()}) == len(pool)
    finally:
        store.close()
