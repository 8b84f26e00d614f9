"""Errors and the classification of every reply: the one place an HTTP status is interpreted.

    SyncError                      anything the sync engine reports on purpose
    ├── TransientError             retry with backoff (the queue keeps the job pending)
    │   ├── NetworkError           connect error, DNS, reset: the server went away or never came
    │   ├── TimeoutError_          connect/read/write/pool timeout
    │   ├── ServerBusyError        502/503/504, 429, idempotency_key_in_use (Retry-After kept)
    │   │   └── ServerSaturatedError   429 server_busy: the whole server, every request waits
    │   └── MalformedReplyError    not JSON, or JSON of the wrong shape (dead after the limit)
    └── AuthError                  401: sync pauses and asks to sign in again (jobs untouched)

A permanent refusal or a conflict of one job is not raised: it is that job's outcome, recorded
by the queue (dead, or conflict) with its `Verdict`. A cancelled sync is silent
(asyncio.CancelledError is never wrapped). Anything else is a bug. httpx exceptions are
translated in one place, `from_httpx`, at the transport boundary.

Every verdict carries a `ReplyKind` and a `Reason` code; the attempt row stores both and the
UI words a failure from the code. A protocol adds only its own rows and asks this table for
the rest (`app.sync.tus.classify`: an offset mismatch, a locked upload, a damaged chunk, an
upload gone). Mutations are classified by `classify_status` (the table
below, as documented in docs/device.md) and `classify_failure`; reads (the changes feed, a
record) by `read_error`; an escalation's reply by `classify_escalation`, an admin's
decision by `classify_decision`, a pin's by `classify_pin`.

    =====================================  ============  ===============================
    outcome                                class         job becomes
    =====================================  ============  ===============================
    connect error, DNS, reset, timeout     transient     pending + backoff; offline probe
    429 server_busy + Retry-After          transient     pending exactly at Retry-After,
                                                         not an attempt; all requests wait
    429 (rate_limited), 503 + Retry-After  transient     pending exactly at Retry-After,
                                                         not an attempt
    502, 504; 429, 503 without one         transient     pending + backoff
    409 idempotency_key_in_use             transient     pending + Retry-After
    malformed / non-JSON reply             transient     pending; dead after the limit
    200/201 (replayed or not)              success       done (replay counted)
    409 version_conflict, current==intent  success       done (applied earlier, reply lost)
    409 version_conflict                   conflict      conflict (auto-merge or a person)
    400, 403, 404, 413, 415, 422           permanent     dead with the server's reason
    401                                    auth          pending, worker paused, sign in
    other 4xx                              permanent     dead
    other 5xx                              transient     pending + backoff
    =====================================  ============  ===============================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.states import Reason, ReplyKind

if TYPE_CHECKING:
    import httpx

__all__ = [
    "AuthError",
    "MalformedReplyError",
    "NetworkError",
    "Reason",
    "ReplyKind",
    "ServerBusyError",
    "ServerSaturatedError",
    "SyncError",
    "TimeoutError_",
    "TransientError",
    "Verdict",
    "classify_decision",
    "classify_escalation",
    "classify_failure",
    "classify_pin",
    "classify_reply",
    "classify_status",
    "declined",
    "from_httpx",
    "parse_retry_after",
    "read_error",
    "retry_reason",
    "saturated",
]


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


class ServerSaturatedError(ServerBusyError):
    """The server process works on all it may at once (429 ``server_busy``): its Retry-After
    holds every request of the device, not only the one refused."""


class MalformedReplyError(TransientError):
    pass


class AuthError(SyncError):
    """401: the server refused this device's token; sync pauses until the person signs in."""

    status = 401


@dataclass(frozen=True)
class Verdict:
    """What to do with a job, from the server's status code and error word: the kind, the
    reason in words (stored with the attempt, shown after the UI's own sentence) and as a
    code (what the UI words)."""

    kind: ReplyKind
    reason: str
    code: Reason


_PERMANENT = {
    400: (Reason.INVALID, "the server refused the request as malformed"),
    403: (Reason.FORBIDDEN, "this device is not allowed to do that"),
    404: (Reason.NOT_FOUND, "the work order does not exist on the server"),
    413: (Reason.TOO_LARGE, "the change is too large for the server"),
    415: (Reason.UNSUPPORTED_TYPE, "the server does not take this type of content"),
    422: (Reason.INVALID, "the server rejected the values"),
}

_TRANSIENT, _PERMANENT_KIND = ReplyKind.TRANSIENT, ReplyKind.PERMANENT


def classify_status(status: int, error: str | None = None) -> Verdict:
    """Pure classification of a mutation's HTTP outcome (see the module table)."""
    if status in (200, 201):
        return Verdict(ReplyKind.SUCCESS, "applied", Reason.APPLIED)
    if status == 409:
        if error == "idempotency_key_in_use":
            return Verdict(
                _TRANSIENT, "the server is still processing the first try", Reason.KEY_IN_USE
            )
        if error == "version_conflict":
            return Verdict(
                ReplyKind.CONFLICT, "the work order changed on the server", Reason.VERSION_CONFLICT
            )
        return Verdict(_PERMANENT_KIND, f"conflict: {error or 'unknown'}", Reason.REFUSED)
    if status == 401:
        return Verdict(
            ReplyKind.AUTH,
            "the server refused this device's token: sign in again",
            Reason.SIGNED_OUT,
        )
    if status == 429:
        return Verdict(_TRANSIENT, "rate limited by the server", Reason.RATE_LIMITED)
    if status in (502, 503, 504):
        return Verdict(_TRANSIENT, f"server unavailable ({status})", Reason.SERVER_BUSY)
    if status == 422 and error == "idempotency_key_reused":
        return Verdict(
            _PERMANENT_KIND, "idempotency key reused with a different body", Reason.KEY_REUSED
        )
    if status in _PERMANENT:
        code, words = _PERMANENT[status]
        detail = f" ({error})" if error else ""
        return Verdict(_PERMANENT_KIND, words + detail, code)
    if 400 <= status < 500:
        return Verdict(_PERMANENT_KIND, f"refused by the server ({status})", Reason.REFUSED)
    return Verdict(_TRANSIENT, f"server error ({status})", Reason.SERVER_ERROR)


def classify_reply(status: int, error: str | None, raw_error: str | None) -> Verdict:
    """A mutation's reply, read whole: as `classify_status`, but a success, a conflict or
    any 409 whose body could not be read (``raw_error``) is a malformed reply to retry: their
    meaning is in the body, so it is not a permanent refusal."""
    verdict = classify_status(status, error)
    readable = raw_error is None
    if readable or (verdict.kind not in (ReplyKind.SUCCESS, ReplyKind.CONFLICT) and status != 409):
        return verdict
    return Verdict(_TRANSIENT, f"malformed reply: {raw_error}", Reason.MALFORMED)


def classify_failure(error: TransientError) -> Verdict:
    """A request that got no usable reply (network, timeout, busy, malformed): transient."""
    if isinstance(error, TimeoutError_):
        code = Reason.TIMEOUT
    elif isinstance(error, MalformedReplyError):
        code = Reason.MALFORMED
    elif isinstance(error, ServerBusyError):
        code = Reason.SERVER_BUSY
    else:
        code = Reason.NETWORK
    return Verdict(_TRANSIENT, str(error), code)


def read_error(
    status: int,
    error: str | None,
    retry_after: float | None,
    what: str,
    raw_error: str | None = None,
) -> SyncError | None:
    """What a read (the changes feed, a record) that answered ``status`` raises, or None for
    a 200. A read the server refuses is not a person's problem: it is tried again later."""
    verdict = classify_status(status, error)
    if verdict.kind is ReplyKind.AUTH:
        return AuthError(verdict.reason)
    if verdict.kind is _TRANSIENT and status != 409:
        kind = ServerSaturatedError if saturated(status, error) else ServerBusyError
        return kind(f"{what}: server busy ({status})", retry_after=retry_after)
    if status != 200:
        return MalformedReplyError(f"{what}: unexpected reply {status} {raw_error or ''}")
    return None


def declined(status: int) -> bool:
    """Whether an answer declines the request unseen, for the server's load: 429 (the
    device's rate limit, or the process's admission control) or 503 (a process or a
    middlebox shedding load). With a `Retry-After` the job waits exactly that, and the answer
    is not one of its attempts: it says nothing of the edit, so a storm gives none up."""
    return status in (429, 503)


def saturated(status: int, error: str | None) -> bool:
    """Whether an answer says the whole server is saturated (server/admission/): then no
    request of any kind goes before its Retry-After. Any other busy answer holds back only
    what it answered (that job, or the reads), so a busy feed never stops the edits."""
    return status == 429 and error == "server_busy"


def classify_escalation(status: int, error: str | None = None) -> Verdict:
    """An escalation's reply (``POST /v1/conflicts``). As a mutation's, except that a 408 or
    any 409 is tried again with the next sync instead of refused for good."""
    if status in (408, 409):
        return Verdict(_TRANSIENT, f"not sent for review yet ({status})", Reason.SERVER_BUSY)
    return classify_status(status, error)


def classify_decision(status: int, error: str | None = None) -> Verdict:
    """The reply to an admin's decision on a review (resolve or dismiss)."""
    if status == 409 and error == "conflict_not_open":
        return Verdict(
            _PERMANENT_KIND, "someone else already decided this conflict", Reason.ALREADY_DECIDED
        )
    if status == 409:
        return Verdict(
            ReplyKind.CONFLICT, "the work order changed on the server", Reason.VERSION_CONFLICT
        )
    return classify_status(status, error)


def classify_pin(status: int, error: str | None = None) -> Verdict:
    """The reply to a pin or an unpin (``POST``/``DELETE /v1/pins/{id}``): as a mutation's,
    with 204 (nothing to say: already so) a success too."""
    if status == 204:
        return Verdict(ReplyKind.SUCCESS, "applied", Reason.APPLIED)
    return classify_status(status, error)


def retry_reason(verdict: Verdict) -> str:
    """A short, stable name for why a job is retried (the `retry_reason:*` counters): its
    reason code, so a counter and the attempt row name a retry alike."""
    return str(verdict.code)


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
    # Here, not at the top: the commands on the local store (`fieldsync list`) never load
    # httpx (0.1 s of CPU), the transport that raises these has.
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        return TimeoutError_(f"timed out ({type(exc).__name__})")
    if isinstance(exc, httpx.RemoteProtocolError):
        return NetworkError("the connection broke mid-reply")
    if isinstance(exc, httpx.ConnectError):
        return NetworkError("cannot reach the server")
    if isinstance(exc, httpx.DecodingError):
        return MalformedReplyError("the reply could not be decoded")
    return NetworkError(f"network error ({type(exc).__name__})")
