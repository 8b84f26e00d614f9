"""Sync routes served in one worker-thread hop: dependencies, validation and endpoint together.

FastAPI runs each sync dependency in a worker thread of its own and then the sync endpoint in
another, and solves everything between on the event loop. For a mutation that is two hops
(authentication reads the database, so it is sync) and the loop's share of the work: about a
quarter of the server's CPU per request on 2 cores (benchmarks/server_bench.py). `OneHopRoute`
keeps the route as declared (the OpenAPI document, `declare`'s access marks) and serves it by
reading the body on the loop, then doing, in one worker thread, what FastAPI's request handler
does in the same order and with FastAPI's own functions:

1. the body parsed as JSON (a body that is not JSON: 422 `json_invalid`, before anything);
2. each dependency, depth first in declaration order, cached per request (the device's 401
   and 429, the idempotency key's 400: raised as they come);
3. the route's own header and body parameters validated (422, all errors together);
4. the endpoint.

So every answer, error bodies and their precedence included, is the one FastAPI gives
(tests/server/test_one_hop.py compares the two over awkward requests). Async dependencies
must not await (they run to completion in the thread); a route whose shape this does not
cover is refused when the app is built.

Those functions and fields are FastAPI's internals, and FastAPI is not pinned: when one of
them is missing or no longer has the shape read here (`fastapi_gaps`), the route is served
by FastAPI's own handler instead (the same answers, two hops), with a warning in the log.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import email.message
import inspect
import json
import logging
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import routing as fastapi_routing
from fastapi.dependencies import utils as fastapi_utils
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic_core import PydanticUndefined
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from server.logs import log_event

__all__ = ["OneHopRoute", "fastapi_gaps"]

logger = logging.getLogger(__name__)

_Handler = Callable[[Request], Coroutine[Any, Any, Response]]

#: The parameters of FastAPI's functions called here, as they are called.
_SIGNATURES = {
    "request_body_to_args": ("body_fields", "received_body", "embed_body_fields"),
    "request_params_to_args": ("fields", "received_params"),
}
#: The fields of a `Dependant` read here. Any other `…_param_name` is a kind of injected
#: parameter this module does not know, so it cannot tell whether a route uses it.
_DEPENDANT_FIELDS = frozenset(
    (
        "path_params", "query_params", "header_params", "cookie_params", "body_params",
        "dependencies", "name", "call", "use_cache", "request_param_name",
        "http_connection_param_name", "websocket_param_name", "response_param_name",
        "background_tasks_param_name", "security_scopes_param_name",
    )
)  # fmt: skip
#: What a route (or, included in a router, its effective context) must carry.
_ROUTE_FIELDS = ("dependant", "body_field", "_embed_body_fields", "strict_content_type")


def _signature_gaps() -> list[str]:
    gaps = []
    for name, expected in _SIGNATURES.items():
        function = getattr(fastapi_utils, name, None)
        try:
            parameters = tuple(inspect.signature(function).parameters) if function else ()
        except (TypeError, ValueError):
            parameters = ()
        if parameters != expected:
            gaps.append(f"fastapi.dependencies.utils.{name}{expected}")
    return gaps


def fastapi_gaps(route: Any = None) -> list[str]:
    """What one hop needs of FastAPI's internals (and of `route`, if given) that the installed
    FastAPI does not have as this module reads it: empty when one hop can serve."""
    gaps = _signature_gaps()
    if not dataclasses.is_dataclass(Dependant):
        gaps.append("Dependant as a dataclass")
    else:
        names = {field.name for field in dataclasses.fields(Dependant)}
        gaps += [f"Dependant.{name}" for name in sorted(_DEPENDANT_FIELDS - names)]
        gaps += [
            f"Dependant.{name} (unknown)"
            for name in sorted(names - _DEPENDANT_FIELDS)
            if name.endswith("_param_name")
        ]
    # FastAPI ≥ 0.120 serves an included route through an effective context (its prefix and
    # the includer's dependencies) handed to `get_route_handler` in a context variable; older
    # ones copy the route instead. With the first but not the second, the route alone would
    # miss the includer's dependencies.
    effective = hasattr(fastapi_routing, "_EffectiveRouteContext")
    if effective and not hasattr(fastapi_routing, "_effective_route_context_var"):
        gaps.append("fastapi.routing._effective_route_context_var")
    if route is not None:
        gaps += [f"route.{name}" for name in _ROUTE_FIELDS if not hasattr(route, name)]
    return gaps


#: Threads the one-hop routes run in: as many as Starlette's own pool lets run at once (40).
#: A plain executor: anyio's `to_thread` (which `run_in_threadpool` calls) spent more of the
#: event loop per request than all the routing above it.
_POOL_SIZE = 40
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _thread_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_POOL_SIZE, thread_name_prefix="one-hop")
        return _pool


async def _in_thread(function: Callable[..., Response], *args: Any) -> Response:
    """`function(*args)` in a worker thread, in a copy of this context (the correlation id),
    as `run_in_threadpool` runs it; a cancellation waits for the thread, as anyio's does."""
    context = contextvars.copy_context()
    future = asyncio.get_running_loop().run_in_executor(
        _thread_pool(), context.run, function, *args
    )
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await asyncio.wait([future])
        raise


def _finish(value: Any) -> Any:
    """The result of `value`, running a coroutine that never suspends to its end here."""
    if not inspect.iscoroutine(value):
        return value
    try:
        value.send(None)
    except StopIteration as done:
        return done.value
    value.close()
    raise RuntimeError("a one-hop route's dependency awaited something")


def _unsupported(dependant: Dependant) -> list[str]:
    """What `dependant` (or a dependency of it) needs that one hop does not serve."""
    problems = [
        name
        for name in (
            "websocket_param_name",
            "background_tasks_param_name",
            "response_param_name",
            "security_scopes_param_name",
        )
        if getattr(dependant, name, None)
    ]
    call = dependant.call
    if call is not None and (inspect.isgeneratorfunction(call) or inspect.isasyncgenfunction(call)):
        problems.append(f"generator dependency {getattr(call, '__name__', call)}")
    for sub in dependant.dependencies:
        problems += _unsupported(sub)
    return problems


def _optional_text(field: Any) -> bool:
    """A header parameter declared `str | None = None` under an alias of its own: its value
    is the header's first value, or None (FastAPI's validation cannot refuse either)."""
    info = field.field_info
    return (
        info.annotation == (str | None)
        and info.alias is not None
        and field.default is None
        and not info.is_required()
    )


def _solve(
    request: Request, dependant: Dependant, body: Any, cache: dict[Any, Any]
) -> tuple[dict[str, Any], list[Any]]:
    """FastAPI's `solve_dependencies`, in this thread: the same order, caching and errors."""
    values: dict[str, Any] = {}
    errors: list[Any] = []
    for sub in dependant.dependencies:
        sub_values, sub_errors = _solve(request, sub, body, cache)
        if sub_errors:
            errors.extend(sub_errors)
            continue
        key = sub.call  # FastAPI adds OAuth scopes, which no route here has
        if sub.use_cache and key in cache:
            solved = cache[key]
        else:
            assert sub.call is not None
            solved = _finish(sub.call(**sub_values))
            cache.setdefault(key, solved)
        if sub.name is not None:
            values[sub.name] = solved
    headers = []
    for field in dependant.header_params:
        if _optional_text(field):  # what FastAPI's validation would hand over, unchanged
            values[field.name] = request.headers.get(field.alias, field.default)
        else:
            headers.append(field)
    for params, source in (
        (dependant.path_params, "path_params"),
        (dependant.query_params, "query_params"),
        (headers, "headers"),
        (dependant.cookie_params, "cookies"),
    ):
        if params:  # the request's cookies (say) are parsed only for a route that reads them
            found, problems = fastapi_utils.request_params_to_args(params, getattr(request, source))
            values.update(found)
            errors += problems
    if dependant.body_params:
        found, problems = _finish(
            fastapi_utils.request_body_to_args(
                body_fields=dependant.body_params, received_body=body, embed_body_fields=False
            )
        )
        values.update(found)
        errors.extend(problems)
    for name in (dependant.http_connection_param_name, dependant.request_param_name):
        if name:
            values[name] = request
    return values, errors


def _json_body(request: Request, raw: bytes, strict: bool) -> Any:
    """The body as FastAPI hands it to validation: JSON if it says so, else the bytes."""
    if not raw:
        return PydanticUndefined  # FastAPI's "no body": a required one is missing
    kind = request.headers.get("content-type")
    if not kind:
        return raw if strict else json.loads(raw)
    message = email.message.Message()
    message["content-type"] = kind
    if message.get_content_maintype() == "application":
        subtype = message.get_content_subtype()
        if subtype == "json" or subtype.endswith("+json"):
            return json.loads(raw)
    return raw


def _no_endpoint() -> None:
    raise AssertionError("a route without an endpoint")


def _unreadable() -> HTTPException:
    """FastAPI's answer to a body it could not read or decode (400)."""
    return HTTPException(400, "There was an error parsing the body")


class OneHopRoute(APIRoute):
    """A sync endpoint with a JSON body, its dependencies solved in the endpoint's thread."""

    def get_route_handler(self) -> _Handler:
        route: Any = self
        # Included in a router, FastAPI builds the handler of the route as included (its
        # prefix and the includer's dependencies), handed over in this context variable.
        included = getattr(fastapi_routing, "_effective_route_context_var", None)
        context = included.get() if included is not None else None
        if context is not None and getattr(context, "original_route", None) is self:
            route = context
        gaps = fastapi_gaps(route)
        if gaps:
            log_event(
                logger, logging.WARNING, "one-hop routing unavailable: FastAPI's handler serves",
                path=self.path, fastapi_missing=gaps,
            )  # fmt: skip
            return super().get_route_handler()
        dependant: Dependant = route.dependant
        problems = _unsupported(dependant)
        endpoint: Callable[..., Any] = dependant.call or _no_endpoint
        if inspect.iscoroutinefunction(endpoint) or route.body_field is None:
            problems.append("a sync endpoint with a body")
        if route._embed_body_fields:
            problems.append("embedded body fields")
        if problems:
            raise TypeError(f"{self.path} cannot be served in one hop: {', '.join(problems)}")
        strict = route.strict_content_type
        strict = getattr(strict, "value", strict)

        def serve(request: Request, raw: bytes) -> Response:
            try:
                body = _json_body(request, raw, strict)
            except json.JSONDecodeError as error:
                detail = {
                    "type": "json_invalid",
                    "loc": ("body", error.pos),
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": error.msg},
                }
                raise RequestValidationError([detail], body=error.doc) from error
            except Exception as error:  # not UTF-8, say
                raise _unreadable() from error
            values, errors = _solve(request, dependant, body, {})
            if errors:
                raise RequestValidationError(errors, body=body)
            response = endpoint(**values)
            if not isinstance(response, Response):
                raise TypeError(f"{self.path} must answer a Response")
            return response

        async def handle(request: Request) -> Response:
            try:
                raw = await request.body()
            except HTTPException:  # the body limit (server/http.py) answers 413
                raise
            except Exception as error:
                raise _unreadable() from error
            return await _in_thread(serve, request, raw)

        return handle
