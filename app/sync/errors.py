"""Errors and the classification of every delivery outcome.

    SyncError                      anything the sync engine reports on purpose
    ├── TransientError             retry with backoff (the queue keeps the job pending)
    │   ├── NetworkError           connect error, DNS, reset: the server went away or never came
    │   ├── TimeoutError_          connect/read/write/pool timeout
    │   ├── ServerBusyError        502/503/504, 429, idempotency_key_in_use (Retry-After kept)
    │   └── MalformedReplyError    not JSON, or JSON of the wrong shape (dead after the limit)
    ├── PermanentError             show the person; the job is dead-lettered with the reason
    │   └── AuthError              401: sync pauses and asks to sign in again (jobs untouched)
    └── ConflictError              409 version_conflict: waits for a person (or merges itself)

A cancelled sync is silent (asyncio.CancelledError is never wrapped). Anything else is a bug.
httpx exceptions are translated in one place, `from_httpx`, at the transport boundary.

The classification table (`classify_status`), as documented in the README:

    =====================================  ============  ===============================
    outcome                                class         job becomes
    =====================================  ============  ===============================
    connect error, DNS, reset, timeout     transient     pending + backoff; offline probe
    502, 503, 504                          transient     pending + backoff (Retry-After)
    429                                    transient     pending + Retry-After
    409 idempotency_key_in_use             transient     pending + Retry-After
    malformed / non-JSON reply             transient     pending; dead after the limit
    200/201 (replayed or not)              success       done (replay counted)
    409 version_conflict, current==intent  success       done (applied earlier, reply lost)
    409 version_conflict                   conflict      conflict (auto-merge or a person)
    400, 403, 404, 413, 422                permanent     dead with the server's reason
    401                                    auth          pending, worker paused, sign in
    other 4xx                              permanent     dead
    other 5xx                              transient     pending + backoff
    =====================================  ============  ===============================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import httpx

__all__ = [
    "AuthError",
    "ConflictError",
    "MalformedReplyError",
    "NetworkError",
    "PermanentError",
    "ServerBusyError",
    "SyncError",
    "TimeoutError_",
    "TransientError",
    "Verdict",
    "classify_status",
    "from_httpx",
    "parse_retry_after",
    "retry_reason",
]

Kind = Literal["success", "transient", "permanent", "auth", "conflict"]


class SyncError(Exception):
    """Base of every error the sync engine raises on purpose."""


class TransientError(SyncError):
    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NetworkError(TransientError):
    pass


class TimeoutError_(TransientError):  # noqa: N801 - the builtin name is taken
    pass


class ServerBusyError(TransientError):
    pass


class MalformedReplyError(TransientError):
    pass


class PermanentError(SyncError):
    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class AuthError(PermanentError):
    pass


class ConflictError(SyncError):
    pass


@dataclass(frozen=True)
class Verdict:
    """What to do with a job, from the server's status code and error word."""

    kind: Kind
    reason: str


_PERMANENT_WORDS = {
    400: "the server refused the request as malformed",
    403: "this device is not allowed to do that",
    404: "the work order does not exist on the server",
    413: "the change is too large for the server",
    422: "the server rejected the values",
}


def classify_status(status: int, error: str | None = None) -> Verdict:
    """Pure classification of an HTTP outcome (see the module table)."""
    if status in (200, 201):
        return Verdict("success", "applied")
    if status == 409:
        if error == "idempotency_key_in_use":
            return Verdict("transient", "the server is still processing the first try")
        if error == "version_conflict":
            return Verdict("conflict", "the work order changed on the server")
        return Verdict("permanent", f"conflict: {error or 'unknown'}")
    if status == 401:
        return Verdict("auth", "the server refused this device's token: sign in again")
    if status == 429:
        return Verdict("transient", "rate limited by the server")
    if status in (502, 503, 504):
        return Verdict("transient", f"server unavailable ({status})")
    if status == 422 and error == "idempotency_key_reused":
        return Verdict("permanent", "idempotency key reused with a different body")
    if status in _PERMANENT_WORDS:
        detail = f" ({error})" if error else ""
        return Verdict("permanent", _PERMANENT_WORDS[status] + detail)
    if 400 <= status < 500:
        return Verdict("permanent", f"refused by the server ({status})")
    return Verdict("transient", f"server error ({status})")


def retry_reason(outcome: TransientError | int, error: str | None = None) -> str:
    """A short, stable name for why a job is retried (the `retry_reason:*` counters)."""
    if isinstance(outcome, TimeoutError_):
        return "timeout"
    if isinstance(outcome, MalformedReplyError):
        return "malformed"
    if isinstance(outcome, ServerBusyError):
        return "server_busy"
    if isinstance(outcome, TransientError):
        return "network"
    if outcome == 429:
        return "rate_limited"
    if outcome == 409 and error == "idempotency_key_in_use":
        return "key_in_use"
    return f"http_{outcome}"


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds only; dates are clock-dependent)."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def from_httpx(exc: httpx.HTTPError) -> TransientError:
    """Translate an httpx transport error. The URL is kept, headers (the token) never."""
    if isinstance(exc, httpx.TimeoutException):
        return TimeoutError_(f"timed out ({type(exc).__name__})")
    if isinstance(exc, httpx.RemoteProtocolError):
        return NetworkError("the connection broke mid-reply")
    if isinstance(exc, httpx.ConnectError):
        return NetworkError("cannot reach the server")
    if isinstance(exc, httpx.DecodingError):
        return MalformedReplyError("the reply could not be decoded")
    return NetworkError(f"network error ({type(exc).__name__})")
