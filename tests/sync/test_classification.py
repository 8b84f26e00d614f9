"""The classification table, Retry-After parsing and backoff timing: pure functions, no I/O."""

from __future__ import annotations

import random

import httpx
import pytest

from app.store.backoff import BackoffPolicy, backoff_delay
from app.sync.errors import (
    MalformedReplyError,
    NetworkError,
    TimeoutError_,
    classify_status,
    from_httpx,
    parse_retry_after,
)
from app.sync.merge import intent_applied, three_way


@pytest.mark.parametrize(
    ("status", "error", "kind"),
    [
        (200, None, "success"),
        (201, None, "success"),
        (502, None, "transient"),
        (503, None, "transient"),
        (504, None, "transient"),
        (500, None, "transient"),
        (429, "rate_limited", "transient"),
        (409, "idempotency_key_in_use", "transient"),
        (409, "version_conflict", "conflict"),
        (400, "missing_idempotency_key", "permanent"),
        (403, "forbidden", "permanent"),
        (404, "not_found", "permanent"),
        (413, "payload_too_large", "permanent"),
        (422, "invalid_payload", "permanent"),
        (422, "idempotency_key_reused", "permanent"),
        (418, None, "permanent"),
        (401, "unauthorized", "auth"),
    ],
)
def test_every_row_of_the_table(status: int, error: str | None, kind: str) -> None:
    verdict = classify_status(status, error)
    assert verdict.kind == kind
    assert verdict.reason


def test_permanent_reasons_carry_the_servers_word() -> None:
    assert "invalid_payload" in classify_status(422, "invalid_payload").reason
    assert "payload_too_large" in classify_status(413, "payload_too_large").reason


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (httpx.ConnectError("refused"), NetworkError),
        (httpx.ConnectTimeout("slow"), TimeoutError_),
        (httpx.ReadTimeout("slow"), TimeoutError_),
        (httpx.ReadError("reset"), NetworkError),
        (httpx.RemoteProtocolError("cut"), NetworkError),
        (httpx.DecodingError("gzip"), MalformedReplyError),
    ],
)
def test_httpx_errors_are_transient(exc: httpx.HTTPError, kind: type[Exception]) -> None:
    assert isinstance(from_httpx(exc), kind)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("7", 7.0), (" 0.5 ", 0.5), (None, None), ("", None), ("soon", None), ("-3", None)],
)
def test_retry_after(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header) == seconds


class FixedRng(random.Random):
    """uniform() returns the top of its range times ``fraction``: exact, reproducible."""

    def __init__(self, fraction: float) -> None:
        super().__init__(0)
        self.fraction = fraction

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * self.fraction


def test_backoff_doubles_up_to_the_cap_with_equal_jitter() -> None:
    policy = BackoffPolicy(initial=1.0, base=2.0, cap=10.0, jitter=0.5)
    low = [backoff_delay(n, policy, FixedRng(0.0)) for n in range(1, 7)]
    high = [backoff_delay(n, policy, FixedRng(1.0)) for n in range(1, 7)]
    assert low == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert high == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_backoff_spreads_devices_that_failed_together() -> None:
    policy = BackoffPolicy(initial=1.0, cap=60.0, jitter=0.5)
    delays = {round(backoff_delay(4, policy, random.Random(seed)), 6) for seed in range(20)}
    assert len(delays) == 20
    assert all(4.0 <= d <= 8.0 for d in delays)


def test_retry_after_is_a_floor_but_capped() -> None:
    policy = BackoffPolicy(initial=0.05, cap=30.0, jitter=0.5)
    assert backoff_delay(1, policy, FixedRng(0.0), retry_after=7.0) == 7.0
    assert backoff_delay(1, policy, FixedRng(0.0), retry_after=86400.0) == 30.0
    assert backoff_delay(1, policy, FixedRng(0.0), retry_after=None) == 0.025


def test_huge_attempt_counts_do_not_overflow() -> None:
    policy = BackoffPolicy(initial=1.0, cap=300.0, jitter=0.0)
    assert backoff_delay(10_000, policy, random.Random(1)) == 300.0


def test_three_way_merge_per_field() -> None:
    base = {"title": "Pump", "site": "A", "notes": ""}
    merge = three_way(
        base, {"title": "Pump seal", "notes": "x"}, {**base, "site": "B", "notes": "y"}
    )
    assert merge.overlapping == ("notes",)
    assert merge.auto_merged == {"title": "mine", "site": "theirs"}
    assert merge.patch == {"title": "Pump seal"}


def test_intent_applied() -> None:
    current = {"title": "Pump seal", "deleted": False}
    assert intent_applied("update", {"title": "Pump seal"}, current)
    assert not intent_applied("update", {"title": "Other"}, current)
    assert not intent_applied("delete", {}, current)
    assert intent_applied("delete", {}, {**current, "deleted": True})
