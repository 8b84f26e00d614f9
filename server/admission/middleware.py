"""The ASGI middleware that asks `Admission` before a device request runs.

Only the device API (`/v1/…`) is admitted so: `/healthz` must answer during a storm (a device
that cannot reach it thinks the server is down and backs off as if offline), and tus uploads
(`/v1/uploads…`) are bounded by their own locks and budgets, while a slow link would hold a
slot for the length of a chunk. A refusal is answered before the body is read (uvicorn reads
and drops the rest, keeping the connection) as `429 {"error": "server_busy"}` with
`Retry-After`.
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Receive, Scope, Send

from server.admission.limit import Admission, RetryAdvice
from server.metrics import Metrics
from server.settings import Settings

__all__ = ["AdmissionMiddleware", "admission_for"]

logger = logging.getLogger(__name__)

_ADMITTED_PREFIX = "/v1/"
_EXEMPT_PREFIX = "/v1/uploads"
_BODY = b'{"error":"server_busy"}'


def admission_for(settings: Settings) -> Admission | None:
    """The admission of one server process (None: unbounded, `max_in_flight_requests` 0)."""
    if settings.max_in_flight_requests <= 0:
        return None
    limit = settings.max_in_flight_requests
    advice = RetryAdvice(settings.busy_retry_after_max_seconds, limit, time.monotonic)
    return Admission(
        limit,
        settings.max_queued_requests,
        settings.queue_wait_seconds,
        advice,
    )


class AdmissionMiddleware:
    """Runs a device request once `Admission` lets it, else answers 429 at once (and counts
    it in `metrics`: `fieldsync_admission_refusals_total`)."""

    def __init__(self, app: ASGIApp, admission: Admission, metrics: Metrics) -> None:
        self.app = app
        self.admission = admission
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (
            scope["type"] != "http"
            or not path.startswith(_ADMITTED_PREFIX)
            or path.startswith(_EXEMPT_PREFIX)
        ):
            await self.app(scope, receive, send)
            return
        wait = await self.admission.enter()
        if wait is not None:
            self.metrics.inc("fieldsync_admission_refusals_total")
            await _refuse(send, wait)
            return
        started = time.monotonic()
        try:
            await self.app(scope, receive, send)
        finally:
            self.admission.leave(started)


async def _refuse(send: Send, retry_after: int) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(_BODY)).encode()),
        (b"retry-after", str(retry_after).encode()),
    ]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": _BODY})
