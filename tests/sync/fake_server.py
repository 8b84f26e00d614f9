"""A scripted stand-in for the sync server behind `httpx.MockTransport` (no sockets)."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable
from typing import Any

import httpx

from app.records import work_order_defaults

__all__ = ["FakeServer", "record"]

Scripted = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


def record(entity_id: str, version: int = 1, **fields: Any) -> dict[str, Any]:
    """A server record in wire form."""
    base: dict[str, Any] = {
        "id": entity_id,
        "title": "Replace pump seal",
        **work_order_defaults(),
        "version": version,
        "updated_at": "2024-05-01T10:00:00.000Z",
        "updated_by": "office",
    }
    base.update(fields)
    return base


def json_response(status: int, body: Any, **headers: str) -> httpx.Response:
    return httpx.Response(status, json=body, headers=headers)


class FakeServer:
    """Answers mutations from a script (then by applying them), and an empty changes feed.

    ``script`` holds what the next mutation requests get: a Response, an exception to raise
    (httpx.ConnectError...), or a function of the request. When it runs out, mutations succeed.
    ``changes`` does the same for the changes feed, which is empty once it runs out.
    """

    def __init__(self, date_offset_s: float = 0.0) -> None:
        self.script: list[Scripted] = []
        self.changes: list[Scripted] = []
        self.requests: list[httpx.Request] = []
        self.date_offset_s = date_offset_s
        self.transport = httpx.MockTransport(self.handle)

    @property
    def mutation_requests(self) -> list[httpx.Request]:
        return [r for r in self.requests if r.url.path.startswith("/v1/mutations")]

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.mutation_requests]

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = self._answer(request)
        response.headers["Date"] = email.utils.formatdate(
            time.time() + self.date_offset_s, usegmt=True
        )
        return response

    def _answer(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/healthz":
            return json_response(200, {"status": "ok"})
        if path == "/v1/changes":
            if self.changes:
                return self._play(self.changes.pop(0), request)
            return json_response(200, {"changes": [], "next": "0", "has_more": False})
        if path.startswith("/v1/mutations"):
            if self.script:
                return self._play(self.script.pop(0), request)
            return self.apply(request)
        return json_response(404, {"error": "not_found"})

    @staticmethod
    def _play(scripted: Scripted, request: httpx.Request) -> httpx.Response:
        if isinstance(scripted, Exception):
            raise scripted
        if isinstance(scripted, httpx.Response):
            return scripted
        return scripted(request)

    @staticmethod
    def applied(mutation: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        version = (mutation.get("base_version") or 0) + 1
        fields = dict(mutation.get("fields") or {})
        if mutation["op"] == "delete":
            fields = {"deleted": True}
        status = 201 if mutation["op"] == "create" else 200
        return status, {"record": record(mutation["entity_id"], version, **fields)}

    def apply(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path == "/v1/mutations":
            status, reply = self.applied(body)
            return json_response(status, reply)
        results = []
        for item in body["mutations"]:
            status, reply = self.applied(item)
            results.append(
                {
                    "idempotency_key": item["idempotency_key"],
                    "status": status,
                    "body": reply,
                    "replayed": False,
                }
            )
        return json_response(200, {"results": results})
