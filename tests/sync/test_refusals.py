"""A server that says "not now" (429, 503 with Retry-After) delays a job, never gives it up.

A refusal is about the server's load (its per-device rate limit, its admission control, a
middlebox shedding load), not about the edit: the device waits at least the Retry-After, and
the refusal does not spend the attempts after which a failing edit is given up. Against the
real server on loopback (its rate limit on), and through the fault proxy for a 503.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.attachments import Attachments
from app.states import AttachmentState
from app.store.backoff import BackoffPolicy
from app.store.db import connection
from app.store.jobs import TOPIC_ATTACHMENTS
from app.store.store import Store
from server.embedded import EmbeddedServer, start_server
from tests.chaos.plans import ScriptedPlan, status
from tests.chaos.proxy import FaultProxy
from tests.support.api import ServerApi
from tests.sync.conftest import CREW
from tests.sync.sync_support import job_rows, make_engine, make_store, run_engine_until

#: One failed attempt is enough to give an edit up: any refusal counted as one kills it.
ONE_ATTEMPT = 1
#: Fast retries, but a cap above the Retry-Afters here (the cap bounds a Retry-After too).
BACKOFF = BackoffPolicy(initial=0.05, base=2.0, cap=5.0, jitter=0.5)


@pytest.fixture
def limited_server(server_sqlite: str) -> Iterator[EmbeddedServer]:
    """The real server with a per-device limit of one request at once, one each 2 s: slow
    enough that the engine's first try still meets the limit the test used up, however long a
    loaded machine takes to start it (at two a second the token came back first)."""
    with start_server(server_sqlite, rate_limit_burst=1, rate_limit_per_second=0.5) as running:
        yield running


@pytest.fixture
def strict_store(tmp_path: Path) -> Iterator[Store]:
    with make_store(tmp_path / "device", max_attempts=ONE_ATTEMPT, backoff=BACKOFF) as opened:
        yield opened


def attempts(store: Store, job_id: int) -> list[tuple[float, str, int | None, str | None]]:
    """(claimed at, outcome, HTTP status, reason code) of each attempt, in order."""
    return (
        connection(store.db)
        .execute(
            "SELECT started_at, outcome, http_status, reason_code FROM attempts "
            "WHERE job_id = ? ORDER BY id",
            (job_id,),
        )
        .fetchall()
    )


def settled(store: Store) -> bool:
    return all(job["status"] in ("done", "dead") for job in job_rows(store))


async def deliver_all(store: Store, base_url: str, token: str) -> None:
    """Run the engine until every job is done or given up."""
    engine = make_engine(store, base_url, token, batch_size=1)
    await run_engine_until(engine, lambda: settled(store), within_s=15.0)


async def deliver(store: Store, base_url: str, token: str) -> dict[str, Any]:
    """Run the engine until its one job is done or given up; that job's row."""
    await deliver_all(store, base_url, token)
    [job] = job_rows(store)
    return job


async def test_a_device_over_its_rate_limit_waits_and_delivers_the_edit(
    limited_server: EmbeddedServer, strict_store: Store
) -> None:
    token = limited_server.add_device("phone", user=CREW)
    api = ServerApi(limited_server.base_url, token)
    try:
        api.client.get("/v1/changes")  # takes the device's one token: the next is refused
        refused = api.client.get("/v1/changes")
    finally:
        api.close()
    assert refused.status_code == 429
    assert refused.json()["error"] == "rate_limited"
    retry_after = float(refused.headers["Retry-After"])
    job_id = strict_store.record_edit("create", None, {"title": "Replace pump seal"}).job_id

    job = await deliver(strict_store, limited_server.base_url, token)

    tries = attempts(strict_store, job_id)
    assert job["status"] == "done", tries
    assert [(outcome, code) for _, outcome, _, code in tries[:-1]] == [
        ("retry", "rate_limited")
    ] * (len(tries) - 1), tries
    assert len(tries) >= 2, "the first try met the limit"
    for (refused_at, *_), (next_at, *_) in zip(tries, tries[1:], strict=False):
        assert next_at - refused_at >= retry_after, tries  # at least the Retry-After
    assert job["attempt_count"] == 1  # only the delivery counted


async def test_a_503_with_retry_after_is_waited_out_without_spending_an_attempt(
    server: EmbeddedServer, strict_store: Store
) -> None:
    token = server.add_device("phone", user=CREW)
    refusals = [status(503, retry_after=1)] * 2
    upstream = ("127.0.0.1", int(server.base_url.rsplit(":", 1)[1]))
    proxy = FaultProxy(upstream, ScriptedPlan(refusals, paths="/v1/mutations")).start()
    try:
        job_id = strict_store.record_edit("create", None, {"title": "Replace pump seal"}).job_id
        job = await deliver(strict_store, proxy.base_url, token)
    finally:
        proxy.stop()

    tries = attempts(strict_store, job_id)
    assert job["status"] == "done", tries
    assert [(outcome, status_) for _, outcome, status_, _ in tries] == [
        ("retry", 503),
        ("retry", 503),
        ("done", 201),
    ]
    assert all(b[0] - a[0] >= 1.0 for a, b in zip(tries, tries[1:], strict=False)), tries
    assert job["attempt_count"] == 1
    api = ServerApi(server.base_url, token)
    try:
        assert len(api.changes()["changes"]) == 1  # applied once
    finally:
        api.close()


async def test_an_upload_refused_with_503_and_retry_after_is_not_given_up(
    server: EmbeddedServer, strict_store: Store, tmp_path: Path
) -> None:
    token = server.add_device("phone", user=CREW)
    entity = strict_store.record_edit("create", None, {"title": "Broken meter"}).entity_id
    photo = tmp_path / "meter.jpg"
    photo.write_bytes(random.Random(5).randbytes(200_000))
    view = Attachments(strict_store).attach(entity, photo)
    refusals = [status(503, retry_after=1)] * 2
    upstream = ("127.0.0.1", int(server.base_url.rsplit(":", 1)[1]))
    proxy = FaultProxy(upstream, ScriptedPlan(refusals, paths="/v1/uploads")).start()
    try:
        await deliver_all(strict_store, proxy.base_url, token)
    finally:
        proxy.stop()

    uploaded = Attachments(strict_store).get(view.id)
    assert uploaded is not None
    assert uploaded.state is AttachmentState.UPLOADED
    [upload] = [job for job in job_rows(strict_store) if job["topic"] == TOPIC_ATTACHMENTS]
    tries = attempts(strict_store, upload["id"])
    assert [(outcome, status_) for _, outcome, status_, _ in tries[:2]] == [("retry", 503)] * 2
    assert all(b[0] - a[0] >= 1.0 for a, b in zip(tries, tries[1:], strict=False)), tries
    assert upload["status"] == "done"
