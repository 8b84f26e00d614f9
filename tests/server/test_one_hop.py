"""The mutation routes served in one thread hop answer exactly as FastAPI's own handler does:
the same status, body and headers for awkward requests, in the same order of precedence
(a bad token before a bad key before a bad body; a body that is not JSON before all)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import pytest
from fastapi import APIRouter
from fastapi.dependencies import utils as fastapi_utils

from server.embedded import provision_device, start_server
from server.routes import mutations
from server.routing import one_hop
from server.routing.one_hop import OneHopRoute
from tests.support.api import create_body, new_id

SINGLE, BATCH = "/v1/mutations", "/v1/mutations/batch"
JSON = {"Content-Type": "application/json"}


def _plain_copy(router: APIRouter) -> APIRouter:
    """`router`'s routes as FastAPI serves any route."""
    plain = APIRouter(prefix=router.prefix, tags=router.tags)
    for route in router.routes:
        assert isinstance(route, OneHopRoute)
        plain.add_api_route(
            route.path.removeprefix(router.prefix),
            route.endpoint,
            methods=sorted(route.methods),
            dependencies=route.dependencies,
            response_model=route.response_model,
            responses=route.responses,
        )
    return plain


@contextmanager
def _apps(
    db_url: str, monkeypatch: pytest.MonkeyPatch, **limits: Any
) -> Iterator[tuple[httpx.Client, httpx.Client, str]]:
    """The server served in one hop, the same served by FastAPI's handler, and a token."""
    token = provision_device(db_url, new_id(), "worker")
    with ExitStack() as stack:
        fast = stack.enter_context(start_server(db_url, **limits))
        with monkeypatch.context() as patch:
            patch.setattr(mutations, "router", _plain_copy(mutations.router))
            plain = stack.enter_context(start_server(db_url, **limits))
        one, two = (stack.enter_context(httpx.Client(base_url=s.base_url)) for s in (fast, plain))
        yield one, two, token


def _key() -> dict[str, str]:
    return {"Idempotency-Key": new_id()}


def _cases(token: str) -> list[tuple[str, str, Any, bytes]]:
    """(label, path, headers (a dict, or pairs to repeat one), body): sent alike to both."""
    auth = {"Authorization": f"Bearer {token}"}
    bad = {"Authorization": "Bearer fst_not-a-token"}
    good = b'{"entity_id": "x", "op": "create", "base_version": null, "fields": {}}'
    invalid = b'{"entity_id": 5, "op": "teleport", "colour": "red"}'
    nan = b'{"entity_id": NaN, "op": "create", "base_version": null, "fields": {}}'
    return [
        ("no token, invalid body", SINGLE, {**JSON, **_key()}, invalid),
        ("bad token, invalid body", SINGLE, {**JSON, **bad, **_key()}, invalid),
        ("basic scheme", SINGLE, {**JSON, "Authorization": "Basic eDp5", **_key()}, good),
        ("bad token, no key", SINGLE, {**JSON, **bad}, invalid),
        ("bad token, not JSON", SINGLE, {**JSON, **bad, **_key()}, b'{"op": '),
        ("bad token, not UTF-8", SINGLE, {**JSON, **bad, **_key()}, b"\xff\xfe{"),
        ("no key, invalid body", SINGLE, {**JSON, **auth}, invalid),
        ("long key, invalid body", SINGLE, {**JSON, **auth, "Idempotency-Key": "k" * 256}, good),
        ("invalid body", SINGLE, {**JSON, **auth, **_key()}, invalid),
        ("NaN in the body", SINGLE, {**JSON, **auth, **_key()}, nan),
        ("no body", SINGLE, {**auth, **_key()}, b""),
        ("JSON null", SINGLE, {**JSON, **auth, **_key()}, b"null"),
        ("JSON list", SINGLE, {**JSON, **auth, **_key()}, b"[1, 2]"),
        ("text/plain", SINGLE, {"Content-Type": "text/plain", **auth, **_key()}, good),
        ("no content type", SINGLE, {**auth, **_key()}, good),
        ("+json content type", SINGLE, {"Content-Type": "application/x+json", **auth}, good),
        (
            "odd install id",
            SINGLE,
            {**JSON, **auth, **_key(), "Fieldsync-Install": "not an id"},
            good,
        ),
        (
            "empty install id",
            BATCH,
            {**JSON, **auth, "Fieldsync-Install": ""},
            b'{"mutations": []}',
        ),
        (
            "two keys",
            SINGLE,
            [*JSON.items(), *auth.items(), *_key().items(), *_key().items()],
            good,
        ),
        ("batch, bad token, invalid", BATCH, {**JSON, **bad}, b'{"mutations": 3}'),
        ("batch, invalid", BATCH, {**JSON, **auth}, b'{"mutations": 3}'),
        ("batch, no mutations", BATCH, {**JSON, **auth}, b'{"items": []}'),
        ("batch, not JSON", BATCH, {**JSON, **auth}, b"{"),
        ("batch, bad items", BATCH, {**JSON, **auth}, b'{"mutations": [{"op": 1}, 7]}'),
    ]


def _answer(response: Any) -> tuple[int, Any, dict[str, str]]:
    headers = {
        name: value
        for name, value in response.headers.items()
        if name not in ("x-correlation-id", "date")
    }
    return response.status_code, response.json(), headers


def test_one_hop_answers_as_fastapi_does(
    server_sqlite: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed = []
    original = one_hop._json_body
    monkeypatch.setattr(one_hop, "_json_body", lambda *a: parsed.append(1) or original(*a))
    with _apps(server_sqlite, monkeypatch, rate_limit_per_second=0) as (fast, plain, token):
        cases = _cases(token)
        for label, path, headers, body in cases:
            answers = [_answer(c.post(path, headers=headers, content=body)) for c in (fast, plain)]
            assert answers[0] == answers[1], label
    assert len(parsed) == len(cases), "one app each: served in one hop, and by FastAPI"


def test_successes_and_the_rate_limit_answer_alike(
    server_sqlite: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = {"rate_limit_burst": 3, "rate_limit_per_second": 0.001}
    with _apps(server_sqlite, monkeypatch, **limits) as (fast, plain, token):
        auth = {"Authorization": f"Bearer {token}"}
        for client in (fast, plain):
            created = client.post(SINGLE, headers={**auth, **_key()}, json=create_body())
            assert created.status_code == 201
            assert set(created.json()) == {"record"}
            batch = {"mutations": [{"idempotency_key": new_id(), **create_body()}]}
            done = client.post(BATCH, headers=auth, json=batch)
            assert done.status_code == 200
            assert [item["status"] for item in done.json()["results"]] == [201]
        # A body that is not JSON is refused before the device is counted, as it always was.
        statuses = []
        for body in (b"{", b"{}", b"{}"):
            answers = [
                _answer(c.post(SINGLE, headers={**auth, **JSON}, content=body))
                for c in (fast, plain)
            ]
            assert answers[0] == answers[1]
            statuses.append(answers[0][:2])
    # The third token went on a request without a key; the fourth request has none left.
    assert [status for status, _ in statuses] == [422, 400, 429]
    assert statuses[2][1] == {"error": "rate_limited"}


def test_fastapi_changed_internals_fall_back_to_its_own_handler(
    server_sqlite: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A FastAPI whose internals changed shape serves the routes with its own handler (and
    says so in the log): every answer stays the one-hop server's."""
    token = provision_device(server_sqlite, new_id(), "worker")
    cases = _cases(token)

    def answers() -> list[tuple[int, Any, dict[str, str]]]:
        with (
            start_server(server_sqlite, rate_limit_per_second=0) as server,
            httpx.Client(base_url=server.base_url) as client,
        ):
            return [_answer(client.post(p, headers=h, content=b)) for _, p, h, b in cases]

    served = answers()
    original = fastapi_utils.request_body_to_args

    async def reshaped(
        body_fields: Any, received_body: Any, embed_body_fields: bool, *, more: Any = None
    ) -> Any:
        return await original(body_fields, received_body, embed_body_fields)

    parsed = []
    body = one_hop._json_body
    monkeypatch.setattr(one_hop, "_json_body", lambda *a: parsed.append(1) or body(*a))
    monkeypatch.setattr(fastapi_utils, "request_body_to_args", reshaped)
    with caplog.at_level(logging.WARNING, logger=one_hop.logger.name):
        fallen_back = answers()
    assert parsed == [], "FastAPI's own handler served every request"
    warned = {r.path for r in caplog.records if r.msg.startswith("one-hop routing unavailable")}
    assert warned == {SINGLE, BATCH}
    for (label, *_), one, fallback in zip(cases, served, fallen_back, strict=True):
        assert one == fallback, label


def test_gaps_name_what_fastapi_lacks() -> None:
    assert one_hop.fastapi_gaps() == []  # the FastAPI installed here
    assert one_hop.fastapi_gaps(object()) == [
        "route.dependant", "route.body_field", "route._embed_body_fields",
        "route.strict_content_type",
    ]  # fmt: skip
