"""Retry delays: exponential backoff with jitter, and the guard against clock jumps.

Pure functions with no I/O; the random source is injected so tests are exact.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

__all__ = ["BackoffPolicy", "backoff_delay"]


@dataclass(frozen=True)
class BackoffPolicy:
    """``initial * base**(attempt-1)`` seconds, capped, then jittered.

    ``jitter`` is the fraction of the delay that is randomised: 0.5 ("equal jitter") keeps at
    least half the delay, so retries still back off, while devices that failed together spread
    over the other half instead of retrying in lock-step.
    """

    initial: float = 1.0
    base: float = 2.0
    cap: float = 300.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.base < 1 or self.cap < self.initial:
            raise ValueError("backoff needs initial > 0, base >= 1 and cap >= initial")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("jitter is a fraction between 0 and 1")


def backoff_delay(
    attempt: int, policy: BackoffPolicy, rng: random.Random, *, retry_after: float | None = None
) -> float:
    """Seconds to wait before attempt ``attempt + 1``, given ``attempt`` failures so far.

    A server's ``Retry-After`` is honoured as a floor (never retry sooner than it asked),
    but is itself capped so a hostile or broken value cannot park a job for days.
    """
    exponent = max(attempt - 1, 0)
    # Compare in log space: base**exponent overflows floats (OverflowError) for large attempt
    # counts or bases long before the cap stops mattering.
    if exponent * math.log(policy.base) < math.log(policy.cap / policy.initial):
        raw = min(policy.cap, policy.initial * policy.base**exponent)
    else:
        raw = policy.cap
    delay = raw * (1.0 - policy.jitter) + rng.uniform(0.0, raw * policy.jitter)
    if retry_after is not None and retry_after > 0:
        delay = max(delay, min(retry_after, policy.cap))
    return delay
