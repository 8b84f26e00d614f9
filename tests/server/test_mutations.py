"""POST /v1/mutations through real HTTP: every status code of the contract."""

from __future__ import annotations

import time

import pytest

from server.embedded import EmbeddedServer, start_server
from tests.support.api import ServerApi, create_body, new_id


def test_create_returns_the_full_record_with_defaults(api: ServerApi) -> None:
    entity_id = new_id()
    response = api.mutate(create_body(entity_id, site="Depot 4", due_date="2025-03-01"))
    assert response.status_code == 201
    record = response.json()["record"]
    assert record == {
        "id": entity_id,
        "title": "Replace pump seal",
        "site": "Depot 4",
        "status": "open",
        "priority": "normal",
        "notes": "",
        "assignee": "",
        "team": "",
        "due_date": "2025-03-01",
        "deleted": False,
        "version": 1,
        "updated_at": record["updated_at"],
        "updated_by": "phone-1",
    }
    assert record["updated_at"].endswith("Z")
    assert "Idempotent-Replayed" not in response.headers


def test_update_patches_only_the_given_fields_and_bumps_the_version(api: ServerApi) -> None:
    record = api.create(site="Depot 4", notes="bring gloves")
    response = api.update(record["id"], 1, status="in_progress")
    assert response.status_code == 200
    updated = response.json()["record"]
    assert (updated["status"], updated["site"], updated["notes"]) == (
        "in_progress",
        "Depot 4",
        "bring gloves",
    )
    assert updated["version"] == 2


def test_delete_sets_the_tombstone_and_appears_in_the_feed(api: ServerApi) -> None:
    record = api.create()
    body = {"entity_id": record["id"], "op": "delete", "base_version": 1, "fields": {}}
    response = api.mutate(body)
    assert response.status_code == 200
    assert response.json()["record"]["deleted"] is True
    assert response.json()["record"]["version"] == 2
    assert api.changes()["changes"][-1]["deleted"] is True


def test_same_key_same_body_replays_the_stored_answer_without_a_second_effect(
    api: ServerApi,
) -> None:
    record = api.create()
    body = {"entity_id": record["id"], "op": "update", "base_version": 1,
            "fields": {"priority": "high"}}  # fmt: skip
    first = api.mutate(body, key="edit-1")
    again = api.mutate(body, key="edit-1")
    assert first.status_code == again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert api.client.get(f"/v1/records/{record['id']}").json()["record"]["version"] == 2


def test_key_order_and_whitespace_do_not_make_a_different_body(api: ServerApi) -> None:
    body = create_body()
    assert api.mutate(body, key="k").status_code == 201
    reordered = {key: body[key] for key in reversed(list(body))}
    again = api.mutate(reordered, key="k")
    assert again.headers.get("Idempotent-Replayed") == "true"


def test_same_key_different_body_is_rejected(api: ServerApi) -> None:
    assert api.mutate(create_body(), key="k").status_code == 201
    response = api.mutate(create_body(), key="k")
    assert response.status_code == 422
    assert response.json() == {"error": "idempotency_key_reused"}


def test_same_key_while_the_first_is_processing_is_in_use(
    server: EmbeddedServer, api: ServerApi
) -> None:
    device = server.store.tables.Device.get(name="phone-1")
    body = create_body()
    claim = server.store.tables.IdempotencyKey
    from server.db.idempotency import request_hash
    from server.records.mutations import validate_mutation

    now = time.time()
    claim.create(
        device_id=device.id, key="slow", state="processing", claim_token="x" * 32,
        request_hash=request_hash("mutation", validate_mutation(body).canonical()),
        claimed_at=now, created_at=now,
    )  # fmt: skip
    response = api.mutate(body, key="slow")
    assert response.status_code == 409
    assert response.json() == {"error": "idempotency_key_in_use"}
    assert int(response.headers["Retry-After"]) >= 1


def test_an_abandoned_claim_is_taken_over_after_the_lease(
    server: EmbeddedServer, api: ServerApi
) -> None:
    device = server.store.tables.Device.get(name="phone-1")
    body = create_body()
    from server.db.idempotency import request_hash
    from server.records.mutations import validate_mutation

    long_ago = time.time() - 3600
    server.store.tables.IdempotencyKey.create(
        device_id=device.id, key="crashed", state="processing", claim_token="x" * 32,
        request_hash=request_hash("mutation", validate_mutation(body).canonical()),
        claimed_at=long_ago, created_at=long_ago,
    )  # fmt: skip
    assert api.mutate(body, key="crashed").status_code == 201
    assert api.mutate(body, key="crashed").headers["Idempotent-Replayed"] == "true"


def test_stale_base_version_is_a_conflict_carrying_the_current_record(api: ServerApi) -> None:
    record = api.create()
    assert api.update(record["id"], 1, status="done").status_code == 200
    response = api.update(record["id"], 1, status="cancelled")
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "version_conflict"
    assert (body["current"]["version"], body["current"]["status"]) == (2, "done")


def test_create_of_an_existing_id_is_a_conflict_even_with_a_new_key(api: ServerApi) -> None:
    record = api.create()
    response = api.mutate(create_body(record["id"]), key="after-the-key-expired")
    assert response.status_code == 409
    assert response.json()["current"]["id"] == record["id"]


@pytest.mark.parametrize(
    "body",
    [
        {"entity_id": "not-a-uuid", "op": "create", "base_version": None, "fields": {"title": "x"}},
        create_body(title=""),
        create_body(title="x" * 201),
        create_body(status="paused"),
        create_body(colour="red"),
        {**create_body(), "extra": 1},
        {**create_body(), "base_version": 3},
        {"entity_id": new_id(), "op": "update", "base_version": None, "fields": {"title": "x"}},
        {"entity_id": new_id(), "op": "update", "base_version": 1, "fields": {"title": None}},
        {"entity_id": new_id(), "op": "merge", "base_version": 1, "fields": {}},
        create_body(notes="n" * 10_001),
    ],
)
def test_invalid_payloads_are_422(api: ServerApi, body: dict[str, object]) -> None:
    response = api.mutate(body)
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_payload"
    assert "detail" in response.json()


def test_malformed_json_is_422(api: ServerApi) -> None:
    response = api.client.post(
        "/v1/mutations",
        content=b"{not json",
        headers={"Idempotency-Key": "k", "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_payload"


def test_update_of_an_unknown_id_is_404(api: ServerApi) -> None:
    response = api.update(new_id(), 1, title="x")
    assert response.status_code == 404
    assert response.json() == {"error": "not_found"}


def test_missing_or_overlong_idempotency_key_is_400(api: ServerApi) -> None:
    missing = api.client.post("/v1/mutations", json=create_body())
    assert missing.status_code == 400
    assert missing.json() == {"error": "missing_idempotency_key"}
    assert api.mutate(create_body(), key="k" * 256).status_code == 400
    assert api.mutate(create_body(), key="k" * 255).status_code == 201


def test_body_over_the_limit_is_413(api: ServerApi) -> None:
    body = create_body(notes="n" * 70_000)
    assert api.mutate(body).status_code == 413

    def chunks() -> object:
        yield b'{"entity_id": "'
        for _ in range(100):
            yield b"x" * 1024
        yield b'"}'

    streamed = api.client.post(
        "/v1/mutations",
        content=chunks(),
        headers={"Idempotency-Key": "k"},  # type: ignore[arg-type]
    )
    assert streamed.status_code == 413
    assert streamed.json() == {"error": "payload_too_large"}


def test_correlation_id_is_echoed_or_generated(api: ServerApi) -> None:
    response = api.mutate(create_body(), **{"X-Correlation-ID": "trace-42"})
    assert response.headers["X-Correlation-ID"] == "trace-42"
    generated = api.client.get("/healthz").headers["X-Correlation-ID"]
    assert len(generated) == 32


def test_runaway_client_is_rate_limited(sqlite_url: str) -> None:
    with start_server(sqlite_url, rate_limit_burst=5, rate_limit_per_second=0.5) as limited:
        api = ServerApi(limited.base_url, limited.add_device("runaway"))
        try:
            statuses = [api.client.get("/v1/changes").status_code for _ in range(8)]
            assert statuses[:5] == [200] * 5
            assert statuses[5:] == [429] * 3
            response = api.client.get("/v1/changes")
            assert response.json() == {"error": "rate_limited"}
            assert int(response.headers["Retry-After"]) >= 1
        finally:
            api.close()


def test_default_rate_limit_lets_10000_edits_through_in_batches(api: ServerApi) -> None:
    # 20 batches of 500 = 10,000 edits; only the request count matters to the limiter.
    for _ in range(20):
        assert api.client.get("/v1/changes", params={"limit": 1}).status_code == 200
    assert api.batch([]).status_code == 200
