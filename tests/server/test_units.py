"""Pure pieces: the token bucket, request hashing, key retention, metrics text."""

from __future__ import annotations

import dataclasses

from fastapi.responses import JSONResponse

from server.db.idempotency import (
    IdempotentCall,
    Reply,
    execute_idempotent,
    prune_expired,
    request_hash,
)
from server.db.store import open_store
from server.devices.ratelimit import RateLimiter
from server.http import reply_response
from server.metrics import Metrics
from server.settings import Settings


class FakeClock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_token_bucket_refills_over_time() -> None:
    clock = FakeClock()
    limiter = RateLimiter(burst=2, per_second=0.5, clock=clock)
    assert limiter.acquire(1) is None
    assert limiter.acquire(1) is None
    assert limiter.acquire(1) == 2
    assert limiter.acquire(2) is None  # another device has its own bucket
    clock.now += 2
    assert limiter.acquire(1) is None
    assert limiter.acquire(1) is not None


def test_disabled_limiter_never_limits() -> None:
    limiter = RateLimiter(burst=1, per_second=0, clock=FakeClock())
    assert all(limiter.acquire(1) is None for _ in range(100))


def test_request_hash_ignores_key_order() -> None:
    assert request_hash("m", {"a": 1, "b": [1, 2]}) == request_hash("m", {"b": [1, 2], "a": 1})
    assert request_hash("m", {"a": 1}) != request_hash("conflict", {"a": 1})


def test_keys_are_kept_for_the_retention_then_pruned(sqlite_url: str) -> None:
    clock = FakeClock()
    settings = Settings(db_url=sqlite_url, clock=clock)
    store = open_store(sqlite_url)
    effects: list[int] = []

    def effect(_sequence: object) -> Reply:
        effects.append(1)
        return Reply(201, {"ok": True})

    call = IdempotentCall("k", request_hash("m", {}), effect)  # type: ignore[arg-type]
    assert execute_idempotent(store, 1, [call], settings)[0].status == 201
    clock.now += 29 * 86_400
    assert prune_expired(store, settings) == 0
    assert execute_idempotent(store, 1, [call], settings)[0].replayed
    clock.now += 2 * 86_400
    assert prune_expired(store, settings) == 1
    assert not execute_idempotent(store, 1, [call], settings)[0].replayed
    assert len(effects) == 2
    shorter = dataclasses.replace(settings, idempotency_retention_seconds=60)
    clock.now += 61
    assert prune_expired(store, shorter) == 1
    store.close()


def test_failed_effect_releases_the_claim(sqlite_url: str) -> None:
    settings = Settings(db_url=sqlite_url)
    store = open_store(sqlite_url)
    attempts: list[int] = []

    def flaky(_sequence: object) -> Reply:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("disk hiccup")
        return Reply(200, {})

    call = IdempotentCall("k", request_hash("m", {}), flaky)  # type: ignore[arg-type]
    assert execute_idempotent(store, 1, [call], settings)[0].status == 500
    assert execute_idempotent(store, 1, [call], settings)[0].status == 200
    store.close()


def test_metrics_render_prometheus_text() -> None:
    metrics = Metrics()
    metrics.inc("fieldsync_mutations_applied_total", 'pho"ne')
    text = metrics.render()
    assert "# TYPE fieldsync_mutations_applied_total counter" in text
    assert 'fieldsync_mutations_applied_total{device="pho\\"ne"} 1' in text


def test_a_counter_of_the_process_has_no_device_label_and_starts_at_zero() -> None:
    metrics = Metrics()
    assert "\nfieldsync_admission_refusals_total 0\n" in metrics.render()
    metrics.inc("fieldsync_admission_refusals_total")
    metrics.inc("fieldsync_admission_refusals_total")
    text = metrics.render()
    assert "\nfieldsync_admission_refusals_total 2\n" in text
    assert "fieldsync_admission_refusals_total{" not in text
    assert metrics.value("fieldsync_admission_refusals_total") == 2


def test_a_reply_is_written_as_starlette_writes_json() -> None:
    body = {"record": {"title": "Pumpe prüfen ☃", "version": 2, "deleted": False, "due": None},
            "detail": [{"loc": ["fields", 0], "msg": "a \"quote\"\n"}]}  # fmt: skip
    fast = reply_response(Reply(409, body, replayed=True))
    assert fast.body == JSONResponse(body).body
    assert fast.status_code == 409
    assert fast.headers["idempotent-replayed"] == "true"
    assert fast.headers["content-type"] == "application/json"
    huge = {"version": 2**70}  # past 64 bits: orjson refuses it, the standard library writes it
    assert reply_response(Reply(200, huge)).body == JSONResponse(huge).body
