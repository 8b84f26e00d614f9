"""Retry delays: exponential base 2, capped at 300 s, jittered, with a Retry-After floor."""

from __future__ import annotations

import random

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from app.store.backoff import BackoffPolicy, backoff_delay

DEFAULT = BackoffPolicy()
EXACT = BackoffPolicy(jitter=0.0)


def test_defaults_are_base_two_capped_at_five_minutes() -> None:
    assert (DEFAULT.initial, DEFAULT.base, DEFAULT.cap) == (1.0, 2.0, 300.0)
    delays = [backoff_delay(n, EXACT, random.Random(0)) for n in range(0, 12)]
    assert delays == [1, 1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]


@given(attempt=st.integers(0, 40), seed=st.integers(0, 2**32))
def test_jitter_keeps_at_least_half_and_never_exceeds_the_raw_delay(
    attempt: int, seed: int
) -> None:
    raw = min(300.0, 2.0 ** max(attempt - 1, 0))
    delay = backoff_delay(attempt, DEFAULT, random.Random(seed))
    assert raw * 0.5 <= delay <= raw


def test_jitter_spreads_devices_that_failed_together() -> None:
    rng = random.Random(7)
    delays = {backoff_delay(9, DEFAULT, rng) for _ in range(50)}
    assert len(delays) == 50
    assert max(delays) - min(delays) > 30


@pytest.mark.parametrize(
    ("retry_after", "low", "high"),
    [
        (120.0, 120.0, 120.0),  # the server's floor beats a short backoff
        (1e9, 300.0, 300.0),  # but a hostile Retry-After is capped
        (0.0, 0.5, 1.0),  # zero and negative are ignored
        (-5.0, 0.5, 1.0),
        (None, 0.5, 1.0),
    ],
)
def test_retry_after_is_a_capped_floor(retry_after: float | None, low: float, high: float) -> None:
    delay = backoff_delay(1, DEFAULT, random.Random(3), retry_after=retry_after)
    assert low <= delay <= high


def test_retry_after_never_shortens_a_longer_backoff() -> None:
    delay = backoff_delay(9, EXACT, random.Random(0), retry_after=5.0)
    assert delay == 256.0


@example(attempt=60, base=1e6, initial=1.0, jitter=0.5)  # 1e6**59 is past float range
@example(attempt=1100, base=2.0, initial=1.0, jitter=0.0)
@example(attempt=2**63, base=1.0, initial=1.0, jitter=0.0)
@given(
    attempt=st.integers(0, 2**63),
    base=st.floats(1.0, 1e6),
    initial=st.floats(0.001, 10.0),
    jitter=st.floats(0.0, 1.0),
)
def test_huge_attempt_counts_never_overflow(
    attempt: int, base: float, initial: float, jitter: float
) -> None:
    policy = BackoffPolicy(initial=initial, base=base, cap=300.0, jitter=jitter)
    delay = backoff_delay(attempt, policy, random.Random(attempt))
    assert 0.0 <= delay <= 300.0


def test_configurable_policy() -> None:
    policy = BackoffPolicy(initial=5.0, base=3.0, cap=60.0, jitter=0.0)
    delays = [backoff_delay(n, policy, random.Random(0)) for n in (1, 2, 3, 4)]
    assert delays == [5.0, 15.0, 45.0, 60.0]


@pytest.mark.parametrize(
    "kwargs",
    [{"initial": 0.0}, {"base": 0.5}, {"cap": 0.5}, {"jitter": -0.1}, {"jitter": 1.5}],
)
def test_nonsense_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="backoff|jitter"):
        BackoffPolicy(**kwargs)
