"""Per-device token buckets: in process memory, or in the database shared by all processes.

`RateLimiter` counts in this process only (each server process limits on its own).
`SharedRateLimiter` keeps the bucket in the database, shared by every server process on it.
One statement per request takes a token (an upsert that refills the bucket for the time
since its last use and answers whether a token was there), so two processes, or two hosts,
behind one proxy limit a device together: a client that spreads its requests over them gets
the same `burst` and `per_second` as one talking to a single process. The statement is
atomic on both backends (a row lock on PostgreSQL, the write lock on SQLite), so concurrent
requests never take the same token twice.

Time is the wall clock of the process answering (`Settings.clock`); hosts keep it in step
(NTP). A host whose clock lags cannot refill a bucket backwards (`updated` only moves
forward), and one running ahead refills it at most by its lead, once.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

from server.db.store import Store

__all__ = ["RateLimiter", "SharedRateLimiter", "seconds_until_a_token"]


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


class SharedRateLimiter:
    """`burst` requests at once, refilled at `per_second`, counted in the `rate_bucket` table."""

    def __init__(
        self, store: Store, burst: int, per_second: float, clock: Callable[[], float]
    ) -> None:
        self._store = store
        self._burst = float(max(burst, 1))
        self._per_second = per_second
        self._clock = clock
        least, greatest = ("LEAST", "GREATEST") if store.is_postgres else ("MIN", "MAX")
        p = store.db.param
        table = f'"{store.tables.RateBucket._meta.table_name}"'
        refilled = (
            f'{least}(CAST({p} AS DOUBLE PRECISION), {table}."tokens" + '
            f'{greatest}({p} - {table}."updated", 0) * {p})'
        )
        self._sql = (
            f'INSERT INTO {table} ("device_id", "tokens", "updated", "allowed") '
            f'VALUES ({p}, {p}, {p}, {p}) ON CONFLICT ("device_id") DO UPDATE SET '
            f'"tokens" = CASE WHEN {refilled} >= 1 THEN {refilled} - 1 ELSE {refilled} END, '
            f'"allowed" = ({refilled} >= 1), '
            f'"updated" = {greatest}({table}."updated", excluded."updated") '
            'RETURNING "tokens", "allowed"'
        )
        if store.is_postgres:
            # The bucket's commit need not wait for its WAL flush, a second disk wait on every
            # request: a crash can lose only the last fraction of a second of bucket updates
            # (an asynchronous commit loses whole transactions, never corrupts, and the next
            # durable commit flushes it), so a device gets back a few tokens it spent, once.
            # psycopg2 sends both statements in one round trip; the RETURNING row is read.
            self._sql = "SET LOCAL synchronous_commit = off; " + self._sql

    def acquire(self, device_id: int) -> int | None:
        """Take one token; None if allowed, else the seconds to wait (for `Retry-After`)."""
        if self._per_second <= 0:
            return None
        now = self._clock()
        refill = (self._burst, now, self._per_second)
        params = [device_id, self._burst - 1, now, True, *refill * 4]
        with self._store.db.atomic():
            tokens, allowed = self._store.db.execute_sql(self._sql, params).fetchone()
        if allowed:
            return None
        return seconds_until_a_token(float(tokens), self._per_second)
