"""The delivery worker against a scripted server (httpx.MockTransport, no sockets).

Each test drives the real engine (claim, send, classify, record) and checks what the queue,
the cache, the counters and the requests on the wire say afterwards.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.events import AuthRequired, Event
from app.store.backoff import BackoffPolicy
from app.store.cache import apply_server_record
from app.store.db import connection
from app.store.errors import InvalidEditError
from app.store.jobs import Outcome
from app.store.store import Store
from app.sync import pipeline
from app.sync.conflicts import Conflicts
from app.sync.transport import detail_words
from tests.sync.fake_clock import FakeClock
from tests.sync.fake_server import FakeServer, json_response, record
from tests.sync.sync_support import (
    counters,
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
    """Put a record in the cache as if pulled from the server."""
    with store.db.atomic():
        apply_server_record(connection(store.db), server_record, store.clock())


def attempts(store: Store, job_id: int) -> list[tuple[str, str | None]]:
    return (
        connection(store.db)
        .execute("SELECT outcome, error FROM attempts WHERE job_id = ? ORDER BY id", (job_id,))
        .fetchall()
    )


def one_job(store: Store) -> dict[str, Any]:
    [row] = job_rows(store)
    return row


def create(store: Store, **fields: Any) -> int:
    return store.record_edit("create", None, {"title": "Replace pump seal", **fields}).job_id


async def deliver_until(
    store: Store, fake: FakeServer, predicate: Any, *, within_s: float = 10.0, **overrides: Any
) -> Any:
    engine = make_engine(store, URL, TOKEN, transport=fake.transport, **overrides)
    await run_engine_until(engine, predicate, within_s=within_s)
    return engine


def after_first_attempt(store: Store, fake: FakeServer) -> Any:
    return lambda: bool(fake.mutation_requests) and one_job(store)["status"] != "leased"


# -- transient rows ----------------------------------------------------------------------------


TRANSIENT = [
    pytest.param(
        httpx.ConnectError("refused"), "cannot reach the server", "network", id="connect-error"
    ),
    pytest.param(httpx.ReadTimeout("slow"), "timed out", "timeout", id="timeout"),
    pytest.param(json_response(502, {"error": "bad_gateway"}), "502", "server_busy", id="502"),
    pytest.param(json_response(503, {"error": "unavailable"}), "503", "server_busy", id="503"),
    pytest.param(json_response(504, {"error": "timeout"}), "504", "server_busy", id="504"),
    pytest.param(
        json_response(409, {"error": "idempotency_key_in_use"}, **{"Retry-After": "1"}),
        "still processing",
        "key_in_use",
        id="key-in-use",
    ),
]


def reason_codes(store: Store, job_id: int) -> list[tuple[str | None, str | None]]:
    """What each attempt's reply meant and why, as the attempt rows keep them."""
    return (
        connection(store.db)
        .execute("SELECT kind, reason_code FROM attempts WHERE job_id = ? ORDER BY id", (job_id,))
        .fetchall()
    )


@pytest.mark.parametrize(("answer", "reason", "code"), TRANSIENT)
async def test_transient_outcomes_retry_then_deliver(
    store: Store, answer: Any, reason: str, code: str
) -> None:
    job_id = create(store)
    fake = FakeServer()
    fake.script.append(answer)
    await deliver_until(store, fake, lambda: one_job(store)["status"] == "done", batch_size=1)
    outcomes = attempts(store, job_id)
    assert outcomes[0][0] == "retry"
    assert reason in (outcomes[0][1] or "")
    assert outcomes[-1][0] == "done"
    assert reason_codes(store, job_id) == [("transient", code), ("success", "applied")]
    assert one_job(store)["attempt_count"] == 2
    # The retry is the same request: same key, same body.
    first, second = fake.mutation_requests
    assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"]
    assert first.content == second.content


async def test_429_retry_after_is_honoured(tmp_path: Any) -> None:
    with make_store(tmp_path / "d", backoff=BackoffPolicy(initial=0.05, cap=60.0)) as store:
        create(store)
        fake = FakeServer()
        fake.script.append(json_response(429, {"error": "rate_limited"}, **{"Retry-After": "7"}))
        before = time.time()
        await deliver_until(store, fake, after_first_attempt(store, fake), batch_size=1)
        job = one_job(store)
        assert job["status"] == "pending"
        assert "rate limited" in job["last_error"]
        assert job["next_attempt_at"] >= before + 7.0
        assert len(fake.mutation_requests) == 1  # nothing sent before Retry-After


async def test_batch_429_applies_to_every_job(tmp_path: Any) -> None:
    with make_store(tmp_path / "d", backoff=BackoffPolicy(initial=0.05, cap=60.0)) as store:
        for _ in range(3):
            create(store)
        fake = FakeServer()
        fake.script.append(json_response(429, {"error": "rate_limited"}, **{"Retry-After": "5"}))
        before = time.time()
        await deliver_until(
            store,
            fake,
            lambda: (
                bool(fake.mutation_requests)
                and all(j["status"] == "pending" for j in job_rows(store))
            ),
            batch_size=10,
        )
        assert all(j["next_attempt_at"] >= before + 5.0 for j in job_rows(store))


async def test_a_saturated_server_is_waited_exactly_and_never_gives_an_edit_up(
    tmp_path: Any,
) -> None:
    # Before: 429 server_busy counted as a failed attempt, so a storm stretched the backoff
    # past the Retry-After (30 s here instead of 7) and gave edits up after max_attempts.
    slow = BackoffPolicy(initial=30.0, cap=60.0, jitter=0.0)
    with make_store(tmp_path / "d", max_attempts=2, backoff=slow) as store:
        create(store)
        fake = FakeServer()
        fake.script.append(json_response(429, {"error": "server_busy"}, **{"Retry-After": "7"}))
        before = time.time()
        await deliver_until(store, fake, after_first_attempt(store, fake), batch_size=1)
        job = one_job(store)
        assert job["status"] == "pending"
        assert job["attempt_count"] == 0  # the refusal is not an attempt
        assert before + 7.0 <= job["next_attempt_at"] <= time.time() + 7.0  # exactly as asked
        for _ in range(5):  # refused again and again: never dead
            connection(store.db).execute("UPDATE jobs SET next_attempt_at = 0")  # due now
            [claimed] = store.queue.claim("worker-1", 1)
            assert store.queue.refused(claimed, Outcome(error="server busy"), 0.0)
        assert one_job(store)["status"] == "pending"
        assert one_job(store)["attempt_count"] == 0


# -- permanent rows ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (400, {"error": "bad_request", "detail": "Idempotency-Key missing"}, "invalid"),
        (403, {"error": "forbidden", "detail": "workers cannot do that"}, "forbidden"),
        (404, {"error": "not_found", "detail": "no such work order"}, "not_found"),
        (413, {"error": "payload_too_large", "detail": "notes over the limit"}, "too_large"),
        (422, {"error": "invalid_payload", "detail": "title: at most 200 characters"}, "invalid"),
    ],
)
async def test_permanent_outcomes_dead_letter_with_the_servers_reason(
    store: Store, status: int, body: dict[str, str], code: str
) -> None:
    job_id = create(store)
    fake = FakeServer()
    fake.script.append(json_response(status, body))
    await deliver_until(store, fake, lambda: one_job(store)["status"] == "dead", batch_size=1)
    job = one_job(store)
    assert body["detail"] in job["last_error"]
    assert job["attempt_count"] == 1
    assert attempts(store, job_id)[-1][0] == "dead"
    assert reason_codes(store, job_id) == [("permanent", code)]
    assert len(fake.mutation_requests) == 1


# -- 401 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [1, 10])
async def test_401_pauses_the_worker_without_burning_jobs(store: Store, batch_size: int) -> None:
    for _ in range(3):
        create(store)
    fake = FakeServer()
    unauthorized = json_response(401, {"error": "unauthorized"})
    fake.script.extend([unauthorized] * 3)
    events: list[Event] = []
    engine = make_engine(store, URL, TOKEN, transport=fake.transport, batch_size=batch_size)
    engine.events.subscribe(events.append)
    await run_engine_until(engine, lambda: engine.auth_paused)
    jobs = job_rows(store)
    assert [j["status"] for j in jobs] == ["pending"] * 3
    assert [j["attempt_count"] for j in jobs] == [0, 0, 0]
    assert all(j["last_error"] is None for j in jobs)
    assert [type(e) for e in events].count(AuthRequired) == 1
    assert len(fake.mutation_requests) == 1  # paused: the other jobs were not tried


async def test_paused_worker_sends_nothing_until_signed_in(tmp_path: Path) -> None:
    clock = FakeClock()
    with make_store(tmp_path / "device", clock=clock) as store:
        create(store)
        fake = FakeServer()
        fake.script.append(json_response(401, {"error": "unauthorized"}))
        engine = make_engine(store, URL, TOKEN, transport=fake.transport, batch_size=1, clock=clock)
        async with running(engine) as runner:
            await wait_until(engine, runner, lambda: engine.auth_paused)
            paused_at = [len(fake.requests)]
            store.record_edit("create", None, {"title": "saved while signed out"})
            engine.wake()  # as a new edit does
            await clock.advance(3600.0, settle=False)  # an hour, and no timer to fire
            await asyncio.sleep(0)
        assert len(fake.requests) == paused_at[0]
        assert clock.sleeping() == []
        # Signing in again resumes delivery.
        engine = make_engine(store, URL, TOKEN, transport=fake.transport, batch_size=1)
        await run_engine_until(engine, lambda: {j["status"] for j in job_rows(store)} == {"done"})


# -- 409 ---------------------------------------------------------------------------------------


async def conflicted(store: Store) -> tuple[int, str, FakeServer]:
    """An update to a cached work order that the server refused with 409 (same field)."""
    entity = str(uuid.uuid4())
    seed(store, record(entity, 1, title="Pump"))
    job_id = store.record_edit("update", entity, {"title": "Pump (mine)"}).job_id
    current = record(entity, 2, title="Pump (theirs)", updated_by="phone-b")
    fake = FakeServer()
    fake.script.append(json_response(409, {"error": "version_conflict", "current": current}))
    await deliver_until(store, fake, lambda: one_job(store)["status"] == "conflict")
    return job_id, entity, fake


async def test_version_conflict_on_the_same_field_is_captured(store: Store) -> None:
    job_id, entity, fake = await conflicted(store)
    view = Conflicts(store).get(job_id)
    title = {f.name: f for f in view.fields}["title"]
    assert (title.base, title.mine, title.server, title.state) == (
        "Pump",
        "Pump (mine)",
        "Pump (theirs)",
        "overlap",
    )
    assert view.server_version == 2
    assert view.server_updated_by == "phone-b"
    assert len(fake.mutation_requests) == 1  # a conflict is not retried
    # The person still sees their own value.
    assert store.cache.get(entity)["title"] == "Pump (mine)"


def conflict_status(store: Store, job_id: int) -> str:
    row = (
        connection(store.db)
        .execute("SELECT status FROM conflicts WHERE job_id = ?", (job_id,))
        .fetchone()
    )
    return str(row[0])


@pytest.mark.parametrize("way", ["discard", "retry"])
async def test_a_conflict_left_through_the_dead_letters_is_closed(store: Store, way: str) -> None:
    # `fieldsync dead discard|retry` accept a conflicted job too. Its conflict must close with
    # it: resolving it afterwards revived a discarded edit (done -> pending, sent again).
    job_id, _, _ = await conflicted(store)
    if way == "discard":
        Conflicts(store).give_up(job_id)
    else:
        store.queue.retry_dead(job_id)
    after = one_job(store)["status"]
    assert after == ("done" if way == "discard" else "pending")
    assert conflict_status(store, job_id) == "resolved"
    assert Conflicts(store).views() == []

    with pytest.raises(InvalidEditError, match="already resolved"):
        Conflicts(store).resolve(job_id, "mine")
    assert one_job(store)["status"] == after


async def test_resolving_resends_only_a_job_still_in_conflict(store: Store) -> None:
    job_id, _, _ = await conflicted(store)
    # As if something else took the job out of conflict and left the conflict row open.
    connection(store.db).execute(
        "UPDATE jobs SET status = 'done', finished_at = 1 WHERE id = ?", (job_id,)
    )
    with pytest.raises(InvalidEditError, match="no longer in conflict"):
        Conflicts(store).resolve(job_id, "mine")
    assert one_job(store)["status"] == "done"
    assert conflict_status(store, job_id) == "open", "the refused decision changed nothing"


async def test_version_conflict_on_other_fields_merges_by_itself(store: Store) -> None:
    entity = str(uuid.uuid4())
    seed(store, record(entity, 1, title="Pump", site="North"))
    job_id = store.record_edit("update", entity, {"title": "Pump (mine)"}).job_id
    first_key = one_job(store)["idempotency_key"]
    current = record(entity, 2, title="Pump", site="South")
    fake = FakeServer()
    fake.script.append(json_response(409, {"error": "version_conflict", "current": current}))
    await deliver_until(store, fake, lambda: one_job(store)["status"] == "done")
    first, second = fake.bodies()
    assert second == {
        "entity_id": entity,
        "op": "update",
        "base_version": 2,
        "fields": {"title": "Pump (mine)"},
    }
    assert fake.mutation_requests[1].headers["Idempotency-Key"] != first_key
    assert counters(store).get("conflicts_auto_merged") == 1
    assert Conflicts(store).views() == []
    assert [a[0] for a in attempts(store, job_id)][-2:] == ["auto_merged", "done"]


async def test_409_whose_current_is_the_intent_is_done(store: Store) -> None:
    entity = str(uuid.uuid4())
    seed(store, record(entity, 1, title="Pump"))
    store.record_edit("update", entity, {"title": "Pump seal", "site": "North"})
    current = record(entity, 2, title="Pump seal", site="North")
    fake = FakeServer()
    fake.script.append(json_response(409, {"error": "version_conflict", "current": current}))
    await deliver_until(store, fake, lambda: one_job(store)["status"] == "done")
    assert len(fake.mutation_requests) == 1
    assert Conflicts(store).views() == []
    assert counters(store).get("conflicts_already_applied") == 1
    assert store.cache.get(entity)["server_version"] == 2


# -- replays and malformed replies -------------------------------------------------------------


async def test_replayed_success_is_done_and_counted(store: Store) -> None:
    entity = str(uuid.uuid4())
    store.record_edit("create", entity, {"title": "Pump"})
    fake = FakeServer()
    fake.script.append(
        json_response(
            201, {"record": record(entity, 1, title="Pump")}, **{"Idempotent-Replayed": "true"}
        )
    )
    await deliver_until(store, fake, lambda: one_job(store)["status"] == "done")
    assert counters(store).get("duplicates_detected") == 1
    assert store.cache.get(entity)["origin"] == "server"


async def test_replayed_success_in_a_batch_is_counted(store: Store) -> None:
    ids = [create(store) for _ in range(2)]
    fake = FakeServer()

    def replay_all(request: httpx.Request) -> httpx.Response:
        response = fake.apply(request)
        body = json.loads(response.content)
        for result in body["results"]:
            result["replayed"] = True
        return json_response(200, body)

    fake.script.append(replay_all)
    await deliver_until(
        store, fake, lambda: all(j["status"] == "done" for j in job_rows(store)), batch_size=10
    )
    assert len(ids) == 2
    assert counters(store).get("duplicates_detected") == 2


def _raw(status: int, content: bytes, content_type: str) -> httpx.Response:
    return httpx.Response(status, content=content, headers={"content-type": content_type})


MALFORMED = [
    pytest.param(_raw(201, b"<html>proxy</html>", "text/html"), "not JSON", id="html"),
    pytest.param(
        _raw(201, b'{"record": {"id": "x", "vers', "application/json"), "not JSON", id="truncated"
    ),  # fmt: skip
    pytest.param(_raw(201, b"", "application/json"), "empty reply", id="empty"),
    pytest.param(_raw(201, b"[1, 2]", "application/json"), "not a JSON object", id="array"),
    pytest.param(json_response(201, {"ok": True}), "lacks the expected record", id="no-record"),
    # A record the cache cannot store (a NOT NULL column, a text column): before, the ack's
    # transaction failed with IntegrityError and took the engine down, on every start.
    pytest.param(
        json_response(201, {"record": record(str(uuid.uuid4()), 1, title=None)}),
        "unusable record",
        id="title-null",
    ),
    pytest.param(
        json_response(201, {"record": record(str(uuid.uuid4()), 1, notes={"x": 1})}),
        "notes: Input should be a valid string",
        id="notes-object",
    ),
]


@pytest.mark.parametrize(("answer", "reason"), MALFORMED)
async def test_malformed_replies_retry_with_the_reason_then_die(
    tmp_path: Any, answer: httpx.Response, reason: str
) -> None:
    with make_store(tmp_path / "d", max_attempts=3) as store:
        job_id = create(store)
        fake = FakeServer()
        fake.script.extend([answer] * 3)
        await deliver_until(store, fake, lambda: one_job(store)["status"] == "dead", batch_size=1)
        outcomes = attempts(store, job_id)
        assert [o for o, _ in outcomes] == ["retry", "retry", "dead"]
        assert all(reason in (error or "") for _, error in outcomes)
        assert one_job(store)["last_error"].startswith("gave up after 3 attempts")
        assert len(fake.mutation_requests) == 3


async def test_batch_reply_missing_results_is_retried(store: Store) -> None:
    for _ in range(2):
        create(store)
    fake = FakeServer()
    fake.script.append(json_response(200, {"results": []}))
    await deliver_until(
        store, fake, lambda: all(j["status"] == "done" for j in job_rows(store)), batch_size=10
    )
    assert all(j["attempt_count"] == 2 for j in job_rows(store))
    assert "one result per mutation" in attempts(store, 1)[0][1]


# -- endpoints and headers ---------------------------------------------------------------------


async def test_single_endpoint_when_batch_size_is_one(store: Store) -> None:
    for _ in range(4):
        create(store)
    fake = FakeServer()
    await deliver_until(
        store, fake, lambda: all(j["status"] == "done" for j in job_rows(store)), batch_size=1
    )
    assert [r.url.path for r in fake.mutation_requests] == ["/v1/mutations"] * 4


async def test_batch_endpoint_when_batch_size_is_larger(store: Store) -> None:
    for _ in range(5):
        create(store)
    fake = FakeServer()
    await deliver_until(
        store, fake, lambda: all(j["status"] == "done" for j in job_rows(store)), batch_size=10
    )
    [request] = fake.mutation_requests
    assert request.url.path == "/v1/mutations/batch"
    items = json.loads(request.content)["mutations"]
    assert [i["idempotency_key"] for i in items] == [j["idempotency_key"] for j in job_rows(store)]


async def test_every_request_carries_correlation_and_mutations_their_key(store: Store) -> None:
    for _ in range(3):
        create(store)
    fake = FakeServer()

    def delivered_and_pulled() -> bool:
        # The pull follows the flush: wait for it too, not only for the last ack.
        pulled = any(r.url.path == "/v1/changes" for r in fake.requests)
        return pulled and all(j["status"] == "done" for j in job_rows(store))

    await deliver_until(store, fake, delivered_and_pulled, batch_size=1)
    keys = {j["idempotency_key"] for j in job_rows(store)}
    assert {r.headers["Idempotency-Key"] for r in fake.mutation_requests} == keys
    assert all(r.headers.get("X-Correlation-ID") for r in fake.requests)
    assert {r.headers["X-Correlation-ID"] for r in fake.mutation_requests} == {
        j["correlation_id"] for j in job_rows(store)
    }
    assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in fake.requests)
    assert any(r.url.path == "/v1/changes" for r in fake.requests)


# -- dead letters: keys on retry ---------------------------------------------------------------


async def test_dead_job_retried_unchanged_keeps_its_key_edited_gets_a_new_one(
    store: Store,
) -> None:
    create(store)
    fake = FakeServer()
    fake.script.append(json_response(422, {"error": "invalid_payload", "detail": "nope"}))
    await deliver_until(store, fake, lambda: one_job(store)["status"] == "dead")
    job = one_job(store)
    original_key = job["idempotency_key"]

    assert store.queue.retry_dead(job["id"]) == original_key
    fake.script.append(json_response(422, {"error": "invalid_payload", "detail": "nope"}))
    await deliver_until(
        store, fake, lambda: len(fake.mutation_requests) == 2 and one_job(store)["status"] == "dead"
    )
    assert fake.mutation_requests[1].headers["Idempotency-Key"] == original_key

    payload = json.loads(one_job(store)["payload"])
    edited = {**payload, "fields": {**payload["fields"], "title": "Fixed title"}}
    new_key = store.queue.retry_dead(job["id"], edited)
    assert new_key != original_key
    await deliver_until(store, fake, lambda: one_job(store)["status"] == "done")
    last = fake.mutation_requests[-1]
    assert last.headers["Idempotency-Key"] == new_key
    assert json.loads(last.content)["fields"]["title"] == "Fixed title"


# -- clock skew --------------------------------------------------------------------------------


async def test_clock_skew_from_the_date_header_is_measured_and_warned(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeServer(date_offset_s=600.0)
    create(store)
    with caplog.at_level(logging.WARNING, logger="app.sync.engine"):
        engine = await deliver_until(store, fake, lambda: one_job(store)["status"] == "done")
    assert engine.clock_skew_s is not None
    assert 595 <= engine.clock_skew_s <= 605
    assert engine.health()["clock_skew_s"] == engine.clock_skew_s
    assert any("clock differs" in r.getMessage() for r in caplog.records)


async def test_small_clock_skew_is_not_warned(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeServer(date_offset_s=-30.0)
    create(store)
    with caplog.at_level(logging.WARNING, logger="app.sync.engine"):
        engine = await deliver_until(store, fake, lambda: one_job(store)["status"] == "done")
    assert engine.clock_skew_s is not None
    assert -35 <= engine.clock_skew_s <= -25
    assert not any("clock differs" in r.getMessage() for r in caplog.records)


async def test_a_list_of_validation_errors_is_stored_in_words(store: Store) -> None:
    create(store)
    fake = FakeServer()
    detail = [
        {"type": "string_too_long", "loc": ["body", "fields", "title"], "input": "x" * 300,
         "msg": "String should have at most 200 characters"},
        {"type": "missing", "loc": ["body", 0, "entity_id"], "msg": "Field required"},
    ]  # fmt: skip
    fake.script.append(json_response(422, {"error": "invalid_payload", "detail": detail}))
    await deliver_until(store, fake, lambda: one_job(store)["status"] == "dead", batch_size=1)
    assert one_job(store)["last_error"] == (
        "the server rejected the values (invalid_payload): "
        "fields.title: String should have at most 200 characters; entity_id: Field required"
    )


@pytest.mark.parametrize(
    ("detail", "words"),
    [
        (None, None),
        ("", None),
        ([], None),
        ("title: at most 200 characters", "title: at most 200 characters"),
        ([{"loc": ["query", "limit"], "msg": "too big"}], "limit: too big"),
        ([{"loc": [], "msg": "bad"}], "bad"),
        ({"why": ["odd", 1]}, '{"why":["odd",1]}'),
        (["a", 2], '["a",2]'),
    ],
)
def test_detail_words(detail: object, words: str | None) -> None:
    assert detail_words(detail) == words


async def test_the_next_batch_goes_out_while_a_reply_is_being_recorded(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With batches in flight, a reply is recorded in the store thread after the batches it
    let out are claimed: their requests must not wait behind that record too, or the server
    has nothing to work on meanwhile."""
    for _ in range(150):
        create(store)
    fake = FakeServer()
    seen: list[str] = []
    sent = fake.handle

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith("/v1/mutations"):
            seen.append(f"sent {len(fake.mutation_requests) + 1}")
        return sent(request)

    fake.transport = httpx.MockTransport(handle)
    record = pipeline.apply_replies

    def slow_record(*args: Any) -> Any:
        time.sleep(0.2)  # a large batch's bookkeeping on a slow phone
        report = record(*args)
        seen.append(f"recorded {sum(s.startswith('recorded') for s in seen) + 1}")
        return report

    monkeypatch.setattr(pipeline, "apply_replies", slow_record)
    await deliver_until(
        store,
        fake,
        lambda: all(row["status"] == "done" for row in job_rows(store)),
        batch_size=50,
        batch_max_size=50,
        delivery_pipeline=2,
    )
    assert len(fake.mutation_requests) == 3
    # The first full reply lets two batches out; both are on the wire before it is recorded.
    assert seen.index("sent 2") < seen.index("recorded 1"), seen
    assert seen.index("sent 3") < seen.index("recorded 1"), seen
