"""The fault-injecting proxy itself: each fault does what it says, against the real server."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.chaos import proxy as faults
from tests.chaos.helpers import add_device, new_id
from tests.chaos.proxy import FaultProxy, RandomPlan, ScriptedPlan
from tests.support.serve import ServerProcess


@pytest.fixture
def token(server_process: ServerProcess) -> str:
    return add_device(server_process.db_url, "proxy-test")


@pytest.fixture
def direct(server_process: ServerProcess, token: str) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=server_process.base_url, headers=headers, timeout=10) as client:
        yield client


@pytest.fixture
def via(proxy: FaultProxy, token: str) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=proxy.base_url, headers=headers, timeout=5) as client:
        yield client


def _create(client: httpx.Client, entity_id: str) -> httpx.Response:
    body = {"entity_id": entity_id, "op": "create", "base_version": None,
            "fields": {"title": "Proxy test"}}  # fmt: skip
    return client.post("/v1/mutations", json=body, headers={"Idempotency-Key": new_id()})


def _exists(direct: httpx.Client, entity_id: str) -> bool:
    return direct.get(f"/v1/records/{entity_id}").status_code == 200


def test_pass_keeps_the_connection_alive(proxy: FaultProxy, via: httpx.Client) -> None:
    for _ in range(3):
        assert via.get("/healthz").json() == {"status": "ok"}
    assert [r.fault for r in proxy.snapshot()] == ["pass"] * 3


def test_refuse_and_reset_never_apply(
    proxy: FaultProxy, via: httpx.Client, direct: httpx.Client
) -> None:
    proxy.set_plan(ScriptedPlan([faults.refuse(), faults.reset()], paths="/v1/mutations"))
    for _ in range(2):
        entity_id = new_id()
        with pytest.raises(httpx.TransportError):
            _create(via, entity_id)
        assert not _exists(direct, entity_id)


def test_drop_response_applies_but_loses_the_acknowledgement(
    proxy: FaultProxy, via: httpx.Client, direct: httpx.Client
) -> None:
    proxy.set_plan(ScriptedPlan([faults.drop_response()], paths="/v1/mutations"))
    entity_id = new_id()
    with pytest.raises(httpx.TransportError):
        _create(via, entity_id)
    assert _exists(direct, entity_id)
    assert proxy.snapshot()[-1].upstream_status == 201


def test_canned_statuses_do_not_reach_the_server(
    proxy: FaultProxy, via: httpx.Client, direct: httpx.Client
) -> None:
    plan = [faults.status(502), faults.status(503, 1), faults.status(504),
            faults.status(429, retry_after=7)]  # fmt: skip
    proxy.set_plan(ScriptedPlan(plan, paths="/v1/mutations"))
    for fault in plan:
        entity_id = new_id()
        response = _create(via, entity_id)
        assert response.status_code == fault.status
        assert response.headers["content-type"] == "text/html"
        if fault.retry_after is not None:
            assert response.headers["retry-after"] == str(fault.retry_after)
        assert not _exists(direct, entity_id)


def test_truncate_garble_trickle_and_delay(proxy: FaultProxy, via: httpx.Client) -> None:
    proxy.set_plan(
        ScriptedPlan(
            [faults.truncate(), faults.garble(), faults.trickle(400.0), faults.delay(0.3)],
            paths="/v1/changes",
        )
    )
    with pytest.raises(httpx.RemoteProtocolError):
        via.get("/v1/changes")
    garbled = via.get("/v1/changes")
    assert garbled.status_code == 200
    assert garbled.headers["content-type"] == "text/html"
    started = time.monotonic()
    assert via.get("/v1/changes").json()["changes"] == []
    trickled = time.monotonic() - started
    started = time.monotonic()
    assert via.get("/v1/changes").status_code == 200
    assert time.monotonic() - started >= 0.3
    assert trickled >= 0.2  # a few hundred bytes at 400 B/s


def test_link_down_refuses_connections_then_recovers(proxy: FaultProxy, via: httpx.Client) -> None:
    proxy.link_down()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{proxy.base_url}/healthz", timeout=2)
    proxy.link_up()
    assert via.get("/healthz").status_code == 200
    proxy.flap([(0.2, 0.4)])
    time.sleep(0.35)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{proxy.base_url}/healthz", timeout=2)
    proxy.wait_flapping(5)
    assert httpx.get(f"{proxy.base_url}/healthz", timeout=2).status_code == 200


def test_random_plan_is_reproducible() -> None:
    info = faults.RequestInfo(0, "POST", "/v1/mutations", 10)
    first = RandomPlan(seed=42, rate=0.6)
    second = RandomPlan(seed=42, rate=0.6)
    drawn = [first(info) for _ in range(200)]
    assert drawn == [second(info) for _ in range(200)]
    kinds = {fault.kind for fault in drawn}
    assert {"pass", "drop_response", "status", "refuse"} <= kinds
