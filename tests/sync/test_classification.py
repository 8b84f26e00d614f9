"""The classification table, Retry-After parsing and backoff timing: pure functions, no I/O."""

from __future__ import annotations

import random

import httpx
import pytest

from app.store.backoff import BackoffPolicy, backoff_delay
from app.sync.errors import (
    AuthError,
    MalformedReplyError,
    NetworkError,
    Reason,
    ReplyKind,
    ServerBusyError,
    ServerSaturatedError,
    TimeoutError_,
    Verdict,
    classify_decision,
    classify_escalation,
    classify_failure,
    classify_reply,
    classify_status,
    from_httpx,
    parse_retry_after,
    read_error,
    retry_reason,
    saturated,
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


@pytest.mark.parametrize(
    ("status", "error", "code"),
    [
        (200, None, "applied"),
        (503, None, "server_busy"),
        (500, None, "server_error"),
        (429, "rate_limited", "rate_limited"),
        (409, "idempotency_key_in_use", "key_in_use"),
        (409, "version_conflict", "version_conflict"),
        (409, "something_else", "refused"),
        (400, "missing_idempotency_key", "invalid"),
        (403, "forbidden", "forbidden"),
        (404, "not_found", "not_found"),
        (413, "payload_too_large", "too_large"),
        (422, "invalid_payload", "invalid"),
        (422, "idempotency_key_reused", "key_reused"),
        (418, None, "refused"),
        (401, "unauthorized", "signed_out"),
    ],
)
def test_every_verdict_carries_a_reason_code(status: int, error: str | None, code: str) -> None:
    assert classify_status(status, error).code == code


def test_failures_without_a_reply_are_transient_with_their_code() -> None:
    assert classify_failure(TimeoutError_("timed out")).code == Reason.TIMEOUT
    assert classify_failure(NetworkError("cannot reach the server")).code == Reason.NETWORK
    assert classify_failure(MalformedReplyError("bad")).code == Reason.MALFORMED
    assert {classify_failure(NetworkError("x")).kind} == {ReplyKind.TRANSIENT}


def test_an_unreadable_body_is_malformed_only_where_the_body_holds_the_meaning() -> None:
    for status, error in [(200, None), (409, None), (409, "version_conflict")]:
        verdict = classify_reply(status, error, "not JSON")
        assert (verdict.kind, verdict.code) == (ReplyKind.TRANSIENT, Reason.MALFORMED)
    assert classify_reply(422, None, "not JSON").code == Reason.INVALID
    assert classify_reply(200, None, None).code == Reason.APPLIED


def test_reads_raise_by_the_same_table() -> None:
    assert read_error(200, None, None, "changes feed") is None
    assert isinstance(read_error(401, None, None, "changes feed"), AuthError)
    busy = read_error(503, None, 7.0, "changes feed")
    assert isinstance(busy, ServerBusyError)
    assert busy.retry_after == 7.0
    for status in (404, 409, 201):
        assert isinstance(read_error(status, None, None, "record"), MalformedReplyError)


def test_escalations_and_decisions_read_409_their_own_way() -> None:
    assert classify_escalation(409, "version_conflict").kind == ReplyKind.TRANSIENT
    assert classify_escalation(408).kind == ReplyKind.TRANSIENT
    assert classify_escalation(422, "invalid_payload").kind == ReplyKind.PERMANENT
    assert classify_escalation(401).kind == ReplyKind.AUTH
    assert classify_decision(409, "conflict_not_open").code == Reason.ALREADY_DECIDED
    assert classify_decision(409, "stale").code == Reason.VERSION_CONFLICT
    assert classify_decision(403).code == Reason.FORBIDDEN


@pytest.mark.parametrize(
    ("verdict", "name"),
    [
        (classify_status(429), "rate_limited"),
        (classify_status(409, "idempotency_key_in_use"), "key_in_use"),
        (classify_status(503), "server_busy"),
        (classify_status(500), "server_error"),
        (classify_failure(NetworkError("cannot reach the server")), "network"),
        (classify_failure(TimeoutError_("timed out")), "timeout"),
    ],
)
def test_a_retry_is_counted_by_its_reason_code(verdict: Verdict, name: str) -> None:
    assert retry_reason(verdict) == name == verdict.code


def test_only_a_saturated_server_holds_every_request() -> None:
    # 429 server_busy (admission control) is about the server; any other busy answer is
    # about what it answered (a rate-limited device, a busy feed).
    assert saturated(429, "server_busy")
    assert not saturated(429, "rate_limited")
    assert not saturated(503, "server_busy")
    held = read_error(429, "server_busy", 3.0, "changes feed")
    assert isinstance(held, ServerSaturatedError)
    assert held.retry_after == 3.0
    other = read_error(429, "rate_limited", 3.0, "changes feed")
    assert isinstance(other, ServerBusyError)
    assert not isinstance(other, ServerSaturatedError)
