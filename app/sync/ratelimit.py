"""The worker's own request-rate limit: a token bucket, pure apart from the injected clock."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    """``rate`` requests per second on average, bursts of at most ``burst``."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float]) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("rate must be > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = burst
        self._stamp = clock()

    def delay(self) -> float:
        """Seconds to wait before the next request may go; takes the token if 0."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        if self._tokens >= 1:
            self._tokens -= 1
            return 0.0
        return (1 - self._tokens) / self.rate
