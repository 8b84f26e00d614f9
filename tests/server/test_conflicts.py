"""The review queue: raise, list per role, resolve, dismiss, and the record moving meanwhile."""

from __future__ import annotations

from typing import Any

from tests.support.api import ServerApi, new_id


def raise_conflict(api: ServerApi, record: dict[str, Any], key: str = "c1", **mine: Any) -> Any:
    body = {"entity_id": record["id"], "base_version": record["version"],
            "mine": mine or {"status": "cancelled"}, "note": "customer called"}  # fmt: skip
    return api.client.post("/v1/conflicts", json=body, headers={"Idempotency-Key": key})


def test_raise_snapshots_the_server_record(api: ServerApi) -> None:
    record = api.create()
    response = raise_conflict(api, record)
    assert response.status_code == 201
    conflict = response.json()["conflict"]
    assert conflict["status"] == "open"
    assert conflict["entity_id"] == record["id"]
    assert conflict["base_version"] == 1
    assert conflict["mine"] == {"status": "cancelled"}
    assert conflict["server"] == record
    assert conflict["device"] == "phone-1"
    assert conflict["created_at"].endswith("Z")
    again = raise_conflict(api, record)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == response.json()


def test_raise_validates_and_needs_a_key(api: ServerApi) -> None:
    record = api.create()
    assert raise_conflict(api, record, colour="red").status_code == 422
    missing = api.client.post(
        "/v1/conflicts", json={"entity_id": record["id"], "base_version": 1, "mine": {}}
    )
    assert missing.status_code == 400
    unknown = {**record, "id": new_id()}
    assert raise_conflict(api, unknown, key="c9").status_code == 404


def test_workers_see_their_own_conflicts_admins_see_all(
    make_api: Any, api: ServerApi, admin: ServerApi
) -> None:
    other = make_api("phone-2")
    record = api.create()
    mine = raise_conflict(api, record).json()["conflict"]
    theirs = raise_conflict(other, record).json()["conflict"]
    listed = api.client.get("/v1/conflicts").json()["conflicts"]
    assert [c["id"] for c in listed] == [mine["id"]]
    everything = admin.client.get("/v1/conflicts", params={"status": "open"}).json()
    assert [c["id"] for c in everything["conflicts"]] == [mine["id"], theirs["id"]]
    assert api.client.get(f"/v1/conflicts/{theirs['id']}").status_code == 404
    assert api.client.get(f"/v1/conflicts/{mine['id']}").json()["conflict"]["id"] == mine["id"]
    assert api.client.get("/v1/conflicts", params={"status": "bogus"}).status_code == 422


def test_resolve_applies_a_normal_change_and_audits_it(api: ServerApi, admin: ServerApi) -> None:
    record = api.create()
    conflict = raise_conflict(api, record).json()["conflict"]
    cursor = api.changes()["next"]
    merged = {"status": "cancelled", "notes": "per customer"}
    response = admin.client.post(
        f"/v1/conflicts/{conflict['id']}/resolve", json={"fields": merged, "base_version": 1}
    )
    assert response.status_code == 200
    resolved = response.json()
    assert resolved["record"]["version"] == 2
    assert resolved["record"]["status"] == "cancelled"
    assert resolved["record"]["updated_by"] == "office"
    assert resolved["conflict"]["status"] == "resolved"
    assert resolved["conflict"]["decided_by"] == "office"
    assert [r["version"] for r in api.changes(cursor)["changes"]] == [2]
    detail = api.client.get(f"/v1/conflicts/{conflict['id']}").json()["conflict"]
    assert [entry["action"] for entry in detail["audit"]] == ["raised", "resolved"]
    decision = detail["audit"][-1]
    assert (decision["actor"], decision["chosen"]["fields"]) == ("office", merged)
    assert api.client.get("/v1/conflicts", params={"status": "open"}).json()["conflicts"] == []
    twice = admin.client.post(
        f"/v1/conflicts/{conflict['id']}/resolve", json={"fields": merged, "base_version": 2}
    )
    assert (twice.status_code, twice.json()["error"]) == (409, "conflict_not_open")


def test_resolve_is_a_conflict_when_the_record_moved(api: ServerApi, admin: ServerApi) -> None:
    record = api.create()
    conflict = raise_conflict(api, record).json()["conflict"]
    assert api.update(record["id"], 1, title="moved on").status_code == 200
    response = admin.client.post(
        f"/v1/conflicts/{conflict['id']}/resolve",
        json={"fields": {"status": "done"}, "base_version": 1},
    )
    assert response.status_code == 409
    assert response.json()["error"] == "version_conflict"
    assert response.json()["current"]["title"] == "moved on"
    still_open = admin.client.get(f"/v1/conflicts/{conflict['id']}").json()["conflict"]
    assert still_open["status"] == "open"


def test_dismiss_keeps_the_server_version(api: ServerApi, admin: ServerApi) -> None:
    record = api.create()
    conflict = raise_conflict(api, record).json()["conflict"]
    response = admin.client.post(f"/v1/conflicts/{conflict['id']}/dismiss")
    assert response.status_code == 200
    assert response.json()["conflict"]["status"] == "dismissed"
    current = api.client.get(f"/v1/records/{record['id']}").json()["record"]
    assert current == record
    dismissed = admin.client.get("/v1/conflicts", params={"status": "dismissed"}).json()
    assert [c["id"] for c in dismissed["conflicts"]] == [conflict["id"]]
    audit = admin.client.get(f"/v1/conflicts/{conflict['id']}").json()["conflict"]["audit"]
    assert audit[-1]["action"] == "dismissed"
    assert audit[-1]["actor"] == "office"


def test_workers_cannot_decide(api: ServerApi, admin: ServerApi) -> None:
    record = api.create()
    conflict = raise_conflict(api, record).json()["conflict"]
    resolve = api.client.post(
        f"/v1/conflicts/{conflict['id']}/resolve", json={"fields": {}, "base_version": 1}
    )
    assert resolve.status_code == 403
    assert api.client.post(f"/v1/conflicts/{conflict['id']}/dismiss").status_code == 403
    assert admin.client.post("/v1/conflicts/999/dismiss").status_code == 404
