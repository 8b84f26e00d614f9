"""Fifty identical requests at once on SQLite: exactly one effect."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx

from server.embedded import EmbeddedServer
from tests.support.api import ServerApi, create_body


async def fire_identical(
    base_urls: list[str], token: str, body: object, n: int = 50
) -> list[httpx.Response]:
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": "storm"}
    limits = httpx.Limits(max_connections=n)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        start = asyncio.Event()

        async def one(i: int) -> httpx.Response:
            await start.wait()
            url = base_urls[i % len(base_urls)] + "/v1/mutations"
            return await client.post(url, json=body, headers=headers)

        tasks = [asyncio.create_task(one(i)) for i in range(n)]
        await asyncio.sleep(0.05)
        start.set()
        return list(await asyncio.gather(*tasks))


def classify(responses: list[httpx.Response]) -> Counter[str]:
    kinds: Counter[str] = Counter()
    for response in responses:
        if response.headers.get("Idempotent-Replayed") == "true":
            kinds["replayed"] += 1
        elif response.status_code == 409:
            assert response.json() == {"error": "idempotency_key_in_use"}
            assert response.headers["Retry-After"]
            kinds["in_use"] += 1
        else:
            assert response.status_code == 201, response.text
            kinds["applied"] += 1
    return kinds


async def test_fifty_identical_requests_make_one_effect(
    server: EmbeddedServer, api: ServerApi
) -> None:
    body = create_body()
    responses = await fire_identical([server.base_url], api.token, body)
    kinds = classify(responses)
    assert kinds["applied"] == 1
    assert kinds["replayed"] + kinds["in_use"] == 49
    assert server.store.tables.WorkOrder.select().count() == 1
    assert len(api.all_changes()) == 1
    versions = {r.json()["record"]["version"] for r in responses if r.status_code == 201}
    assert versions == {1}
