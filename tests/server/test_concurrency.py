"""Fifty identical requests at once on SQLite: exactly one effect."""

from __future__ import annotations

import asyncio
import random
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


async def fire_overlapping_batches(
    base_urls: list[str], token: str, pool: list[dict[str, object]], n: int = 8
) -> list[list[dict[str, object]]]:
    """`n` batches at once, each a different sample of `pool` (keyed items), so they overlap."""
    rng = random.Random(7)
    batches = [rng.sample(pool, len(pool) // 2) for _ in range(n - 1)] + [list(pool)]
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=n)) as client:
        start = asyncio.Event()

        async def one(i: int) -> list[dict[str, object]]:
            await start.wait()
            url = base_urls[i % len(base_urls)] + "/v1/mutations/batch"
            response = await client.post(url, json={"mutations": batches[i]}, headers=headers)
            assert response.status_code == 200, response.text
            results: list[dict[str, object]] = response.json()["results"]
            return results

        tasks = [asyncio.create_task(one(i)) for i in range(n)]
        await asyncio.sleep(0.05)
        start.set()
        return list(await asyncio.gather(*tasks))


def check_each_key_applied_once(
    pool: list[dict[str, object]], answers: list[list[dict[str, object]]]
) -> None:
    applied: Counter[object] = Counter()
    for results in answers:
        for result in results:
            if result["status"] == 409:
                assert result["body"] == {"error": "idempotency_key_in_use"}
                assert result["retry_after"]
                continue
            assert result["status"] == 201, result
            if not result["replayed"]:
                applied[result["idempotency_key"]] += 1
    assert applied == Counter(item["idempotency_key"] for item in pool)


def batch_pool(size: int = 60) -> list[dict[str, object]]:
    return [{"idempotency_key": f"pool-{i}", **create_body()} for i in range(size)]


async def test_overlapping_batches_at_once_apply_each_item_once(
    server: EmbeddedServer, api: ServerApi
) -> None:
    pool = batch_pool()
    answers = await fire_overlapping_batches([server.base_url], api.token, pool)
    check_each_key_applied_once(pool, answers)
    assert server.store.tables.WorkOrder.select().count() == len(pool)
    assert len(api.all_changes()) == len(pool)
