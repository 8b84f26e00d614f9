"""GET /v1/changes and GET /v1/records/{id}: paging, tombstones, ETags."""

from __future__ import annotations

import threading

import pytest

from tests.support.api import ServerApi, create_body, new_id, read_feed_while


def test_empty_feed(api: ServerApi) -> None:
    assert api.changes() == {"changes": [], "next": "0", "has_more": False}


def test_paging_returns_each_change_once_in_order(api: ServerApi) -> None:
    created = [api.create(title=f"order {i}")["id"] for i in range(7)]
    page = api.changes(limit=3)
    assert [r["id"] for r in page["changes"]] == created[:3]
    assert page["has_more"] is True
    page2 = api.changes(page["next"], limit=3)
    page3 = api.changes(page2["next"], limit=3)
    assert [r["id"] for r in page2["changes"] + page3["changes"]] == created[3:]
    assert page3["has_more"] is False
    assert api.changes(page3["next"]) == {"changes": [], "next": page3["next"], "has_more": False}


def test_a_changed_record_moves_to_the_end_of_the_feed(api: ServerApi) -> None:
    first, second = api.create()["id"], api.create()["id"]
    cursor = api.changes()["next"]
    assert api.update(first, 1, status="done").status_code == 200
    page = api.changes(cursor)
    assert [(r["id"], r["version"]) for r in page["changes"]] == [(first, 2)]
    assert second not in [r["id"] for r in page["changes"]]


def test_bad_since_or_limit_is_422(api: ServerApi) -> None:
    assert api.client.get("/v1/changes", params={"since": "abc"}).status_code == 422
    assert api.client.get("/v1/changes", params={"limit": 0}).status_code == 422


def test_record_etag_and_if_none_match(api: ServerApi) -> None:
    record = api.create()
    response = api.client.get(f"/v1/records/{record['id']}")
    assert response.status_code == 200
    assert response.headers["ETag"] == '"1"'
    assert response.json()["record"] == record
    cached = api.client.get(f"/v1/records/{record['id']}", headers={"If-None-Match": '"1"'})
    assert cached.status_code == 304
    assert cached.headers["ETag"] == '"1"'
    api.update(record["id"], 1, title="changed")
    fresh = api.client.get(f"/v1/records/{record['id']}", headers={"If-None-Match": '"1"'})
    assert (fresh.status_code, fresh.headers["ETag"]) == (200, '"2"')


def test_unknown_record_is_404(api: ServerApi) -> None:
    assert api.client.get(f"/v1/records/{new_id()}").status_code == 404
    assert api.client.get("/v1/records/not-a-uuid").status_code == 404


@pytest.mark.parametrize("reader", ["admin", "assignee"])
def test_paging_under_concurrent_writes_loses_and_repeats_nothing(
    make_api: object, reader: str
) -> None:
    # An admin reads the whole organisation's feed; a worker the scoped feed of its own user,
    # to whom every writer assigns its work orders (issue 16: a worker sees only its scope).
    api = make_api("reader", "admin" if reader == "admin" else "worker")  # type: ignore[operator]
    writers = [make_api(f"writer-{n}") for n in range(4)]  # type: ignore[operator]
    errors: list[BaseException] = []

    def write(writer: ServerApi) -> None:
        try:
            for i in range(30):
                record = writer.create(title=f"w{i}", assignee="reader")
                if i % 3 == 0:
                    assert writer.update(record["id"], 1, notes="edited").status_code == 200
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(w,)) for w in writers]
    for thread in threads:
        thread.start()
    delivered, seen = read_feed_while(api, threads, limit=5, pause_s=0.02)
    for thread in threads:
        thread.join()
    assert not errors
    assert len(delivered) == len(set(delivered))
    final = {r["id"]: r["version"] for r in api.all_changes()}
    assert seen == final
    assert len(final) == 120


def test_tombstones_are_in_the_feed(api: ServerApi) -> None:
    record = api.create()
    body = {**create_body(record["id"]), "op": "delete", "base_version": 1, "fields": {}}
    assert api.mutate(body).status_code == 200
    [change] = api.changes()["changes"]
    assert (change["deleted"], change["version"]) == (True, 2)
