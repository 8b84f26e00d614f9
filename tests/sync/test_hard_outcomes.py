"""Outcomes that used to go wrong: unusable server records, edits that change nothing, edits
given up on, the clock set back mid-backoff, and a server that asks the pull to wait.

The engine runs for real against a scripted server (httpx.MockTransport, no sockets).
"""

from __future__ import annotations

import random
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.events import ConnectivityChanged, Event
from app.store.backoff import BackoffPolicy
from app.store.cache import apply_server_record
from app.store.db import connection
from app.store.errors import InvalidEditError
from app.store.queue import QueueConfig
from app.store.store import Store
from app.sync.conflicts import Conflicts
from tests.sync.fake_clock import FakeClock
from tests.sync.fake_server import FakeServer, json_response, record
from tests.sync.sync_support import (
    FAST_BACKOFF,
    close_engine_thread,
    job_rows,
    make_engine,
    make_store,
    run_engine_until,
    running,
    wait_until,
)

URL = "http://sync.test"
TOKEN = "device-token-123"


def seed(store: Store, server_record: dict[str, Any]) -> None:
    with store.db.atomic():
        apply_server_record(connection(store.db), server_record, store.clock())


def since_tokens(fake: FakeServer) -> list[str | None]:
    return [r.url.params.get("since") for r in fake.requests if r.url.path == "/v1/changes"]


# -- a record the cache cannot store ------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [{"title": None}, {"notes": {"x": 1}}, {"version": "3"}, {"id": "not-a-uuid"}],
    ids=["title-null", "notes-object", "version-text", "id-not-uuid"],
)
async def test_an_unusable_record_in_the_feed_holds_the_pull_not_the_engine(
    store: Store, bad: dict[str, Any]
) -> None:
    # Before: IntegrityError / ProgrammingError out of the page's transaction ended the
    # engine, and every start fetched the same page and ended again.
    entity = str(uuid.uuid4())
    fake = FakeServer()
    page = {"changes": [{**record(entity, 3), **bad}], "next": "5", "has_more": False}
    fake.changes.append(json_response(200, page))
    job_id = store.record_edit("create", None, {"title": "Pump"}).job_id
    engine = make_engine(store, URL, TOKEN, transport=fake.transport)
    try:
        assert await engine.run_until_idle(10.0)
    finally:
        close_engine_thread(engine)

    assert [row["status"] for row in job_rows(store) if row["id"] == job_id] == ["done"]
    assert store.cache.get(entity) is None, "nothing of the unusable record was stored"
    first, second = since_tokens(fake)[:2]
    assert second == first, "the token did not move past the page it could not apply"


# -- an edit that changes nothing the server lacks ----------------------------------------


async def test_an_edit_to_the_value_it_had_is_done_when_the_server_moved_on(
    store: Store,
) -> None:
    # Before: the merge found nothing to send, the empty patch went out, the server refused
    # it as invalid and the edit died, with the stale value still showing.
    entity = str(uuid.uuid4())
    seed(store, record(entity, 1, status="open"))
    store.record_edit("update", entity, {"status": "open"})
    current = record(entity, 2, status="in_progress", updated_by="office")
    fake = FakeServer()
    fake.script.append(json_response(409, {"error": "version_conflict", "current": current}))
    engine = make_engine(store, URL, TOKEN, transport=fake.transport, batch_size=1)
    await run_engine_until(engine, lambda: job_rows(store)[0]["status"] != "pending")

    assert [row["status"] for row in job_rows(store)] == ["done"]
    assert len(fake.mutation_requests) == 1, "no empty patch was sent"
    assert store.cache.get(entity)["status"] == "in_progress"


# -- an edit given up on ------------------------------------------------------------------


async def dead_edit(store: Store, op: str, entity: str | None, **fields: Any) -> int:
    job_id = store.record_edit(op, entity, fields).job_id  # type: ignore[arg-type]
    fake = FakeServer()
    fake.script.append(json_response(403, {"error": "forbidden"}))
    engine = make_engine(store, URL, TOKEN, transport=fake.transport, batch_size=1)
    await run_engine_until(engine, lambda: job_rows(store)[-1]["status"] == "dead")
    return job_id


async def test_discarding_a_dead_update_shows_the_server_values_again(store: Store) -> None:
    entity = str(uuid.uuid4())
    seed(store, record(entity, 1, title="Server title", site="North"))
    job_id = await dead_edit(store, "update", entity, title="Never sent")
    later = store.record_edit("update", entity, {"site": "South"}).job_id  # still queued

    Conflicts(store).give_up(job_id)

    shown = store.cache.get(entity)
    assert shown["title"] == "Server title", "the given-up edit no longer shows"
    assert shown["site"] == "South", "the edit still queued still shows"
    assert shown["pending_edits"] == 1
    assert [r["id"] for r in job_rows(store) if r["status"] == "pending"] == [later]


async def test_discarding_a_dead_delete_gives_the_work_order_back(store: Store) -> None:
    entity = str(uuid.uuid4())
    seed(store, record(entity, 1))
    job_id = await dead_edit(store, "delete", entity)
    assert store.cache.get(entity)["deleted"]

    Conflicts(store).give_up(job_id)

    assert not store.cache.get(entity)["deleted"]
    store.record_edit("update", entity, {"notes": "editable again"})  # not refused


async def test_discarding_a_dead_create_removes_what_the_server_never_had(
    store: Store,
) -> None:
    job_id = await dead_edit(store, "create", None, title="Never created")
    entity = job_rows(store)[0]["entity_key"]

    Conflicts(store).give_up(job_id)

    assert store.cache.get(entity) is None
    audit = connection(store.db).execute("SELECT action FROM audit_log").fetchall()
    assert audit == [("discard",)], "the edit itself is kept in the audit log"


async def test_discarding_a_dead_create_takes_its_queued_edits_along(store: Store) -> None:
    # Before: the later edit stayed queued (and on screen), went out as an update of a
    # record the server never had, and died too: the person had to discard twice.
    job_id = await dead_edit(store, "create", None, title="Never created")
    entity = job_rows(store)[0]["entity_key"]
    later = store.record_edit("update", entity, {"notes": "typed after"}).job_id

    Conflicts(store).give_up(job_id)

    assert {r["id"]: r["status"] for r in job_rows(store)} == {job_id: "done", later: "done"}
    assert store.cache.get(entity) is None
    audit = connection(store.db).execute("SELECT job_id FROM audit_log ORDER BY id").fetchall()
    assert audit == [(job_id,), (later,)], "both are kept in the audit log"


# -- the clock set back while a job waits -------------------------------------------------


async def test_clock_set_back_during_a_backoff_does_not_strand_the_job(tmp_path: Path) -> None:
    # Before: the bound on retry times ran only at start; a running engine waited a day.
    offset = [0.0]
    store = Store(
        tmp_path / "d",
        synchronous="NORMAL",
        queue_config=QueueConfig(backoff=FAST_BACKOFF),
        clock=lambda: time.time() + offset[0],
        rng=random.Random(1),
    )
    store.record_edit("create", None, {"title": "Pump"})
    fake = FakeServer()
    fake.script.append(json_response(503, {"error": "unavailable"}))
    engine = make_engine(store, URL, TOKEN, transport=fake.transport, sweep_interval_s=0.2)

    def set_back_after_the_503() -> bool:
        if fake.mutation_requests and offset[0] == 0.0:
            offset[0] = -86_400.0  # NTP, or a person, sets the clock back a day
        return job_rows(store)[0]["status"] == "done"

    await run_engine_until(engine, set_back_after_the_503, within_s=10.0)
    assert len(fake.mutation_requests) == 2


# -- a server that asks the pull to wait --------------------------------------------------


@pytest.mark.parametrize("status", [429, 503])
async def test_a_busy_pull_waits_as_asked_and_deliveries_go_on(tmp_path: Path, status: int) -> None:
    # Before: Retry-After was ignored on the changes feed; every answer counted as a network
    # failure, the device showed offline and stopped sending while the server answered.
    patient = BackoffPolicy(initial=0.05, base=2.0, cap=300.0, jitter=0.5)
    clock = FakeClock()
    with make_store(tmp_path / "d", backoff=patient, clock=clock) as store:
        fake = FakeServer()
        busy = json_response(status, {"error": "slow_down"}, **{"Retry-After": "60"})
        fake.changes.append(busy)
        states: list[str] = []

        def note(event: Event) -> None:
            if isinstance(event, ConnectivityChanged):
                states.append(event.state)

        engine = make_engine(store, URL, TOKEN, transport=fake.transport, clock=clock)
        engine.events.subscribe(note)
        async with running(engine) as runner:
            await wait_until(engine, runner, lambda: bool(since_tokens(fake)), within_s=5.0)
            refused_at = clock.now
            store.record_edit("create", None, {"title": "Sent while the pull waits"})
            engine.wake()
            await wait_until(
                engine, runner, lambda: job_rows(store)[0]["status"] == "done", within_s=5.0
            )
            assert clock.now - refused_at < 60.0, "the edit waited for the pull"
            await clock.advance(refused_at + 59.0 - clock.now)
            pulls_in_the_minute = len(since_tokens(fake))
            await clock.advance(62.0)  # past the 60 s: the pull is tried again
            pulled_again = len(since_tokens(fake))

    assert pulls_in_the_minute == 1, "no pull before the 60 s the server asked for"
    assert pulled_again == 2, "and one once they have passed"
    assert "offline" not in states
    assert engine.last_error is not None
    assert str(status) in engine.last_error


# -- an escalation the server refuses -----------------------------------------------------


async def test_an_escalation_the_server_refuses_goes_back_to_the_person(store: Store) -> None:
    # Before: the conflict stayed "escalating" for good, re-sent and refused at every sync,
    # while `sync --until-idle` said idle and the person could not escalate it again.
    entity = str(uuid.uuid4())
    seed(store, record(entity, 1, title="Pump"))
    job_id = store.record_edit("update", entity, {"title": "Pump (mine)"}).job_id
    fake = FakeServer()
    current = record(entity, 2, title="Pump (theirs)")
    fake.script.append(json_response(409, {"error": "version_conflict", "current": current}))
    engine = make_engine(store, URL, TOKEN, transport=fake.transport, batch_size=1)
    await run_engine_until(engine, lambda: job_rows(store)[0]["status"] == "conflict")

    conflicts = Conflicts(store)
    with pytest.raises(InvalidEditError, match="at most 2000"):
        conflicts.escalate(job_id, "x" * 2001)  # refused here, before it waits on the server
    conflicts.escalate(job_id, "please look")
    answer = fake._answer

    def refuse_reviews(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/conflicts":
            return json_response(422, {"error": "invalid_payload", "detail": "entity unknown"})
        return answer(request)

    fake._answer = refuse_reviews  # type: ignore[method-assign]
    engine = make_engine(store, URL, TOKEN, transport=fake.transport)
    try:
        await engine.run_until_idle(5.0)
    finally:
        close_engine_thread(engine)
    refused = conflicts.get(job_id)
    assert refused.status == "open", "the person can decide or escalate again"
    assert refused.review_problem == "entity unknown (422)", "and is told why"
    assert refused.to_json()["review_problem"] == "entity unknown (422)"
    assert engine.last_error is not None
    assert "refused to send conflict" in engine.last_error
    conflicts.escalate(job_id, "second try")
    assert conflicts.get(job_id).review_problem is None
