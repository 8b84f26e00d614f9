"""Per-device token bucket (in process memory; each server process limits on its own)."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["RateLimiter", "seconds_until_a_token"]


def seconds_until_a_token(tokens: float, per_second: float) -> int:
    """Whole seconds until a bucket holding `tokens` (< 1) has one (`Retry-After`)."""
    return max(1, math.ceil((1.0 - tokens) / per_second))


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """`burst` requests at once, refilled at `per_second`; `per_second <= 0` disables it."""

    def __init__(self, burst: int, per_second: float, clock: Callable[[], float]) -> None:
        self._burst = float(max(burst, 1))
        self._per_second = per_second
        self._clock = clock
        self._buckets: dict[int, _Bucket] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self._per_second > 0

    def acquire(self, device_id: int) -> int | None:
        """Take one token; None if allowed, else the seconds to wait (for `Retry-After`)."""
        if not self.enabled:
            return None
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(device_id)
            if bucket is None:
                bucket = self._buckets[device_id] = _Bucket(self._burst, now)
            elapsed = max(now - bucket.updated, 0.0)
            bucket.tokens = min(self._burst, bucket.tokens + elapsed * self._per_second)
            bucket.updated = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return None
            return seconds_until_a_token(bucket.tokens, self._per_second)
