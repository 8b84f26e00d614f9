"""The storm bench's simulated device (benchmarks/storm_device.py) speaks the app's protocol: for
the same offline edits it sends what a real `SyncEngine` sends, request for request, to a real
server; and it honours a saturated server's Retry-After as the engine does."""

from __future__ import annotations

import asyncio
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

import httpx

from app.store.store import Store
from app.sync.config import SyncConfig
from app.sync.engine import SyncEngine
from server.embedded import start_server

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from storm_device import Exchange, StormDevice, honour_violations, offline_edits  # noqa: E402

_UUID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")
#: Headers whose values differ per request or per run; their presence is still compared.
_VARYING = {"authorization", "x-correlation-id", "content-length", "host"}


class Requests(httpx.AsyncBaseTransport):
    """The real transport, keeping every request."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.sent: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        response = await self.inner.handle_async_request(request)
        await response.aread()
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def normalised(requests: list[httpx.Request]) -> list[dict[str, Any]]:
    """Each request with its ids and keys numbered by first appearance (so that an update
    naming its create's work order still shows it), the feed position left out."""
    names: dict[str, str] = {}

    def rename(text: str) -> str:
        return _UUID.sub(lambda m: names.setdefault(m[0], f"<id{len(names)}>"), text)

    shown = []
    for request in requests:
        if request.url.path == "/healthz":
            continue  # the engine's offline probe; the bench's devices come back through it
        headers = {
            name: "…" if name in _VARYING else rename(value)
            for name, value in sorted(request.headers.items())
        }
        body = json.loads(rename(request.content.decode())) if request.content else None
        query = {k: v for k, v in request.url.params.items() if k != "since"}
        shown.append({"method": request.method, "path": rename(request.url.path),
                      "query": query, "headers": headers, "body": body})  # fmt: skip
    return shown


def test_the_simulated_device_sends_what_the_engine_sends(
    server_sqlite: str, tmp_path: Path
) -> None:
    async def engine_requests(base_url: str, token: str) -> list[httpx.Request]:
        store = Store(tmp_path / "engine")
        for edit in offline_edits("ana", "crew", 6, random.Random(7)):
            given = edit.entity_id if edit.op == "create" else None
            if edit.op == "create":
                store.record_edit("create", given, edit.fields)
            else:
                assert edit.after is not None
                created = [
                    row
                    for row in store.db.execute_sql(
                        "SELECT id FROM work_orders WHERE title = ?", (edit.after.fields["title"],)
                    )
                ]
                store.record_edit("update", created[0][0], edit.fields)
        transport = Requests()
        config = SyncConfig(server_url=base_url, reconnect_jitter_s=0)
        engine = SyncEngine(store, config, token=lambda: token, transport=transport)
        assert await engine.run_until_idle(30)
        store.close()
        return transport.sent

    async def device_requests(base_url: str, token: str) -> tuple[list[httpx.Request], Any]:
        transport = Requests()
        config = SyncConfig(server_url=base_url)
        edits = offline_edits("ana", "crew", 6, random.Random(7))
        device = StormDevice("sim", token, edits, config, random.Random(1), transport=transport)
        await device.run(jitter=False)
        await device.aclose()
        return transport.sent, device

    with start_server(server_sqlite, rate_limit_per_second=0) as server:
        engine_token = server.add_device("engine-phone", user="ana", team="crew")
        device_token = server.add_device("sim-phone", user="ana", team="crew")
        by_engine = asyncio.run(engine_requests(server.base_url, engine_token))
        by_device, device = asyncio.run(device_requests(server.base_url, device_token))

    assert [r.url.path for r in by_device][0] == "/healthz"
    paths = [r.url.path for r in by_engine]
    assert paths == ["/v1/mutations/batch", "/v1/mutations/batch", "/v1/me", "/v1/changes"]
    assert normalised(by_device) == normalised(by_engine)
    assert [edit.outcome for edit in device.edits] == ["done"] * 6
    assert device.changes_received > 0


def test_honour_violations_counts_requests_sent_inside_a_retry_after() -> None:
    refused = Exchange("POST", "/v1/mutations/batch", 0.0, 0.1, 429, 2.0, True)
    early = Exchange("GET", "/v1/changes", 1.0, 1.1, 200, None, False)
    late = Exchange("GET", "/v1/changes", 2.2, 2.3, 200, None, False)
    busy_feed = Exchange("GET", "/v1/changes", 3.0, 3.1, 429, 9.0, False)  # not saturated
    after_it = Exchange("POST", "/v1/mutations/batch", 3.2, 3.3, 201, None, False)
    assert honour_violations([refused, late, busy_feed, after_it]) == 0
    assert honour_violations([refused, early, late]) == 1
