"""HTTP plumbing shared by the routes: errors, body limits, correlation ids, authentication.

Every error leaves through `install_error_handlers` as `{"error": <name>, …}`: `ApiError`
(raised by routes), each `server.errors.DomainError` by the one table `DOMAIN_ANSWERS`,
FastAPI's validation errors and Starlette's HTTP exceptions.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import orjson
from fastapi import Depends, FastAPI, Header, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.access import Action
from server.auth import AuthenticatedDevice, authenticate
from server.db.idempotency import Reply
from server.db.store import Store
from server.devices.ratelimit import RateLimiter, SharedRateLimiter
from server.devices.status import note_seen
from server.errors import (
    ChecksumMismatch,
    DomainError,
    Forbidden,
    InsufficientStorage,
    InvalidInput,
    KeyReused,
    NotFound,
    OffsetMismatch,
    StorageBudgetExceeded,
    TooLarge,
    UnsupportedMediaType,
    UploadBudgetExceeded,
    UploadExpired,
    UploadInterrupted,
    UploadLocked,
)
from server.logs import correlation_id, log_event
from server.metrics import Metrics
from server.settings import Settings
from server.uploads.blobs import BlobStore, RunningHashes
from server.uploads.locks import UploadLocks

__all__ = [
    "Admin",
    "ApiError",
    "Context",
    "CorrelationMiddleware",
    "CurrentDevice",
    "DOMAIN_ANSWERS",
    "IdempotencyKeyHeader",
    "ServerContext",
    "declare",
    "declared_action",
    "domain_answer",
    "idempotency_key_problem",
    "install_error_handlers",
    "reply_response",
    "undeclared_routes",
]

logger = logging.getLogger("server.access")

_ERROR_NAMES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
}
_CORRELATION_SHAPE = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
#: The answer of each domain error: its status and `error` name (its `detail` follows, if any).
DOMAIN_ANSWERS: dict[type[DomainError], tuple[int, str]] = {
    NotFound: (404, "not_found"),
    Forbidden: (403, "forbidden"),
    InvalidInput: (422, "invalid_payload"),
    KeyReused: (422, "idempotency_key_reused"),
    TooLarge: (413, "payload_too_large"),
    UnsupportedMediaType: (415, "unsupported_media_type"),
    InsufficientStorage: (507, "insufficient_storage"),
    UploadBudgetExceeded: (507, "upload_budget_exceeded"),
    StorageBudgetExceeded: (507, "storage_budget_exceeded"),
    UploadExpired: (410, "upload_expired"),
    UploadLocked: (423, "upload_locked"),
    OffsetMismatch: (409, "offset_mismatch"),
    UploadInterrupted: (409, "upload_interrupted"),
    ChecksumMismatch: (460, "checksum_mismatch"),
}
BATCH_PATH = "/v1/mutations/batch"
UPLOADS_PATH = "/v1/uploads"


@dataclass(frozen=True)
class ServerContext:
    """What every request handler needs; stored on `app.state.server`."""

    settings: Settings
    store: Store
    limiter: RateLimiter | SharedRateLimiter
    metrics: Metrics
    blobs: BlobStore
    hashes: RunningHashes
    locks: UploadLocks


class ApiError(Exception):
    """An answer with a JSON error body, raised from anywhere in a handler."""

    def __init__(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None):
        super().__init__(body.get("error", status))
        self.status = status
        self.body = body
        self.headers = headers or {}


class _ReplyJSON(JSONResponse):
    """A reply's body as Starlette writes it (compact UTF-8 JSON), by orjson when it can: the
    same bytes for the text, integers, booleans and nulls a reply holds, several times faster
    than the standard library, which answers what orjson refuses (a lone surrogate, say)."""

    def render(self, content: Any) -> bytes:
        try:
            return orjson.dumps(content)
        except TypeError:
            return super().render(content)


def reply_response(reply: Reply) -> JSONResponse:
    headers: dict[str, str] = {}
    if reply.replayed:
        headers["Idempotent-Replayed"] = "true"
    if reply.retry_after is not None:
        headers["Retry-After"] = str(reply.retry_after)
    return _ReplyJSON(reply.body, status_code=reply.status, headers=headers)


def domain_answer(error: DomainError) -> JSONResponse:
    """The answer to a domain error, from `DOMAIN_ANSWERS` (a subclass answers as its base)."""
    status, name = next(
        DOMAIN_ANSWERS[kind] for kind in type(error).__mro__ if kind in DOMAIN_ANSWERS
    )
    body = {"error": name} if error.detail is None else {"error": name, "detail": error.detail}
    headers: dict[str, str] = {}
    if error.offset is not None:
        headers["Upload-Offset"] = str(error.offset)  # where the client resumes from
    if error.body_unread:
        # The client stops sending a body nobody reads (one waiting on `Expect:
        # 100-continue` never sent it).
        headers["Connection"] = "close"
    return JSONResponse(body, status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Every error leaves as `{"error": <name>, …}`."""

    async def on_api_error(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, ApiError)
        return JSONResponse(error.body, status_code=error.status, headers=error.headers)

    async def on_domain_error(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, DomainError)
        return domain_answer(error)

    async def on_http_error(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, HTTPException)
        name = _ERROR_NAMES.get(error.status_code, "http_error")
        headers = dict(error.headers or {})
        if error.status_code == 405:
            headers["Allow"] = _allowed_methods(request)
        return JSONResponse({"error": name}, status_code=error.status_code, headers=headers or None)

    async def on_invalid(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        errors = jsonable_encoder(error.errors(), exclude={"url", "ctx"})
        detail = [_json_safe(item) for item in errors]
        return JSONResponse({"error": "invalid_payload", "detail": detail}, status_code=422)

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(DomainError, on_domain_error)
    app.add_exception_handler(HTTPException, on_http_error)
    app.add_exception_handler(RequestValidationError, on_invalid)


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _allowed_methods(request: Request) -> str:
    """`Allow` for a 405: every method some route serves at this path. Starlette's own names
    only the first route's methods, and `/v1/conflicts` has two routes (GET and POST)."""
    routes = request.app.router.routes
    return ", ".join(
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes
        )
    )


def _json_safe(item: Any) -> Any:
    """A validation error item as JSON can carry it: the ``input`` it repeats may be NaN or
    hold a lone surrogate, which would turn the 422 into a 500."""
    try:
        json.dumps(item, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (ValueError, UnicodeEncodeError):
        return {**item, "input": "(not representable as JSON)"}
    return item


def _upload_id(path: str) -> str:
    """The upload a `/v1/uploads/<id>` path names, else ""."""
    prefix = UPLOADS_PATH + "/"
    rest = path[len(prefix) :] if path.startswith(prefix) else ""
    return "" if "/" in rest else rest


def _upload_locks(scope: Scope) -> UploadLocks | None:
    """The upload locks of the app serving `scope` (None outside the server's app)."""
    context = getattr(getattr(scope.get("app"), "state", None), "server", None)
    locks = getattr(context, "locks", None)
    return locks if isinstance(locks, UploadLocks) else None


class CorrelationMiddleware:
    """Sets the correlation id, enforces the body limit, and writes one access-log line."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        presented = _header(scope, b"x-correlation-id")
        cid = presented if presented and _CORRELATION_SHAPE.match(presented) else None
        cid = cid or uuid.uuid4().hex
        token = correlation_id.set(cid)
        state = scope.setdefault("state", {})
        # Requests on one upload take its lock in the order they arrived (uploads/locks.py).
        state["arrived_at"] = arrived_at = time.time()
        upload_id = _upload_id(scope["path"])
        locks = _upload_locks(scope) if upload_id else None
        if locks is not None:
            locks.arrive(upload_id, arrived_at)
        started = time.perf_counter()
        status = 500
        limit = self._body_limit(scope["path"])
        tus = scope["path"].startswith(UPLOADS_PATH)

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"x-correlation-id", cid.encode("ascii")))
                if tus and not any(name == b"tus-resumable" for name, _ in headers):
                    headers.append((b"tus-resumable", b"1.0.0"))  # tus: on every answer
                message = {**message, "headers": headers}
            await send(message)

        received = 0

        async def receive_limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise HTTPException(413)
            return message

        try:
            declared = _header(scope, b"content-length")
            if (
                declared is not None
                and declared.isascii()
                and declared.isdigit()
                and int(declared) > limit
            ):
                response = JSONResponse({"error": "payload_too_large"}, status_code=413)
                await response(scope, receive, send_with_id)
            else:
                await self.app(scope, receive_limited, send_with_id)
        finally:
            log_event(
                logger,
                logging.INFO,
                "request",
                method=scope["method"],
                path=scope["path"],
                status=status,
                duration_ms=round((time.perf_counter() - started) * 1000, 2),
                device=state.get("device_name"),
            )
            correlation_id.reset(token)
            if locks is not None:
                locks.leave(upload_id, arrived_at)

    def _body_limit(self, path: str) -> int:
        """The largest body a request to `path` may carry."""
        if path == BATCH_PATH:
            return self.settings.max_batch_body_bytes
        if path.startswith(UPLOADS_PATH):
            return self.settings.max_upload_bytes  # a chunk never exceeds its upload
        return self.settings.max_body_bytes


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            decoded: str = value.decode("latin-1")
            return decoded
    return None


_bearer = HTTPBearer(auto_error=False)


async def _context(request: Request) -> ServerContext:
    """The server's `ServerContext`: every route takes it as `context: Context`."""
    context: ServerContext = request.app.state.server
    return context


Context = Annotated[ServerContext, Depends(_context)]


def _current_device(  # sync: FastAPI runs it in the thread pool (database I/O)
    request: Request,
    context: Context,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> AuthenticatedDevice:
    header = f"Bearer {credentials.credentials}" if credentials else None
    device = authenticate(context.store, header)
    if device is None:
        raise ApiError(401, {"error": "unauthorized"}, {"WWW-Authenticate": "Bearer"})
    request.state.device_name = device.name
    note_seen(context.store, device.id, context.settings.clock())
    wait = context.limiter.acquire(device.id)
    if wait is not None:
        context.metrics.inc("fieldsync_mutations_rejected_total", device.name)
        raise ApiError(429, {"error": "rate_limited"}, {"Retry-After": str(wait)})
    return device


CurrentDevice = Annotated[AuthenticatedDevice, Depends(_current_device)]


async def _admin(device: CurrentDevice) -> AuthenticatedDevice:
    if not device.is_admin:
        raise ApiError(403, {"error": "forbidden"})
    return device


Admin = Annotated[AuthenticatedDevice, Depends(_admin)]


_KEY_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def idempotency_key_problem(key: object) -> dict[str, str] | None:
    """The 400 body for an unusable idempotency key (header or batch item), or None.

    A NUL cannot be stored by PostgreSQL and a lone surrogate cannot be written back as
    UTF-8: both used to fail the whole request with a 500."""
    if not isinstance(key, str) or not key.strip():
        return {"error": "missing_idempotency_key"}
    if len(key) > 255:
        return {"error": "invalid_idempotency_key", "detail": "1-255 characters"}
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return {"error": "invalid_idempotency_key", "detail": "not valid Unicode text"}
    if _KEY_CONTROL.search(key):
        return {"error": "invalid_idempotency_key", "detail": "no control characters"}
    return None


async def _idempotency_key(
    key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> str:
    problem = idempotency_key_problem(key)
    if problem is not None:
        raise ApiError(400, problem)
    assert key is not None
    return key


IdempotencyKeyHeader = Annotated[str, Depends(_idempotency_key)]


# Each route under /v1/ says which access action it takes (server/access.py asks the rule);
# a server with one that does not never starts: deny by default.
_MARK = "__fieldsync_access__"


def declare(action: Action) -> Any:
    """The dependency a route lists to say which action it takes (`dependencies=[…]`)."""

    async def declared() -> None:  # async: a sync one would cost each request a thread hop
        return None

    setattr(declared, _MARK, action)
    declared.__name__ = f"declares_{action.value}"
    return Depends(declared)


def declared_action(route: APIRoute) -> Action | None:
    """The action `route` declared, if any."""
    for dependency in route.dependant.dependencies:
        call: Callable[..., Any] | None = dependency.call
        found = getattr(call, _MARK, None)
        if isinstance(found, Action):
            return found
    return None


def undeclared_routes(app: FastAPI) -> list[str]:
    """`METHOD path` of each route under /v1/ that declares no action (deny by default:
    `create_app` refuses to build a server with one)."""
    missing: list[str] = []
    for route in app.routes:
        if not isinstance(route, APIRoute) or not route.path.startswith("/v1/"):
            continue
        if declared_action(route) is None:
            missing.extend(f"{method} {route.path}" for method in sorted(route.methods or ()))
    return missing
