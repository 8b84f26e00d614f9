"""POST /v1/mutations/batch: each item keeps the single endpoint's semantics."""

from __future__ import annotations

import time

import pytest

from server.embedded import EmbeddedServer
from tests.server.bad_text import check_unrepresentable_input_is_refused_not_a_crash
from tests.support.api import ServerApi, create_body, new_id


def item(key: str, body: dict[str, object]) -> dict[str, object]:
    return {"idempotency_key": key, **body}


def edit(entity_id: str, base_version: int, **fields: object) -> dict[str, object]:
    return {"entity_id": entity_id, "op": "update", "base_version": base_version, "fields": fields}


def test_one_bad_item_does_not_fail_the_others(api: ServerApi) -> None:
    existing = api.create()
    items = [
        item("a", create_body()),
        item("b", create_body(title="")),
        item("c", edit(new_id(), 1, title="x")),
        item("d", edit(existing["id"], 7, title="x")),
        create_body(),
        item("f", edit(existing["id"], 1, title="y")),
    ]
    response = api.batch(items)
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["status"] for r in results] == [201, 422, 404, 409, 400, 200]
    assert [r["idempotency_key"] for r in results] == ["a", "b", "c", "d", None, "f"]
    assert results[1]["body"]["error"] == "invalid_payload"
    assert results[3]["body"]["error"] == "version_conflict"
    assert results[4]["body"] == {"error": "missing_idempotency_key"}
    assert results[5]["body"]["record"]["title"] == "y"
    assert not any(r["replayed"] for r in results)


def test_a_retried_batch_replays_every_item(api: ServerApi) -> None:
    items = [item(f"k{i}", create_body()) for i in range(10)]
    first = api.batch(items).json()["results"]
    again = api.batch(items).json()["results"]
    assert all(r["replayed"] for r in again)
    assert [r["body"] for r in again] == [r["body"] for r in first]
    assert len(api.all_changes()) == 10


def test_batch_and_single_endpoint_share_keys(api: ServerApi) -> None:
    body = create_body()
    assert api.mutate(body, key="shared").status_code == 201
    [result] = api.batch([item("shared", body)]).json()["results"]
    assert (result["status"], result["replayed"]) == (201, True)
    [reused] = api.batch([item("shared", create_body())]).json()["results"]
    assert (reused["status"], reused["body"]) == (422, {"error": "idempotency_key_reused"})


def test_a_key_repeated_inside_one_batch_is_applied_once(api: ServerApi) -> None:
    body = create_body()
    results = api.batch([item("dup", body), item("dup", body), item("dup", create_body())])
    statuses = [(r["status"], r["replayed"]) for r in results.json()["results"]]
    assert statuses == [(201, False), (201, True), (422, False)]
    assert len(api.all_changes()) == 1


def test_sequential_edits_of_one_record_in_one_batch(api: ServerApi) -> None:
    record = api.create()
    items = [
        item(f"e{v}", {"entity_id": record["id"], "op": "update", "base_version": v,
                       "fields": {"notes": f"step {v}"}})
        for v in range(1, 6)
    ]  # fmt: skip
    results = api.batch(items).json()["results"]
    assert [r["body"]["record"]["version"] for r in results] == [2, 3, 4, 5, 6]


def test_more_than_500_items_is_rejected(api: ServerApi) -> None:
    items = [item(f"k{i}", create_body()) for i in range(501)]
    response = api.batch(items)
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_payload"


def test_invalid_envelope_is_422(api: ServerApi) -> None:
    response = api.client.post("/v1/mutations/batch", json={"mutations": "nope"})
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_payload"


@pytest.mark.slow
def test_a_device_drains_10000_edits_in_batches_under_the_default_limits(
    server: EmbeddedServer, api: ServerApi
) -> None:
    started = time.monotonic()
    for batch_number in range(20):
        items = [item(f"b{batch_number}-{i}", create_body(notes="x" * 100)) for i in range(500)]
        response = api.batch(items)
        assert response.status_code == 200, response.text
        assert {r["status"] for r in response.json()["results"]} == {201}
    assert server.store.tables.WorkOrder.select().count() == 10_000
    assert time.monotonic() - started < 120


def test_unrepresentable_keys_and_input_are_refused_not_a_crash(api: ServerApi) -> None:
    check_unrepresentable_input_is_refused_not_a_crash(api)
