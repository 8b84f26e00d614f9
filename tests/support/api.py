"""A small typed client for the sync server's HTTP contract, used by the tests."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import httpx

__all__ = ["ServerApi", "create_body", "new_id"]

TIMEOUT = httpx.Timeout(30.0)


def new_id() -> str:
    return str(uuid.uuid4())


def create_body(entity_id: str | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "entity_id": entity_id or new_id(),
        "op": "create",
        "base_version": None,
        "fields": {"title": "Replace pump seal", **fields},
    }


class ServerApi:
    """One device's view of the server: its token on every request."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url
        self.token = token
        self.client = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT
        )

    def close(self) -> None:
        self.client.close()

    def mutate(
        self, body: dict[str, Any], key: str | None = None, **headers: str
    ) -> httpx.Response:
        sent = {"Idempotency-Key": key or new_id(), **headers}
        return self.client.post("/v1/mutations", json=body, headers=sent)

    def create(self, entity_id: str | None = None, **fields: Any) -> dict[str, Any]:
        response = self.mutate(create_body(entity_id, **fields))
        assert response.status_code == 201, response.text
        record: dict[str, Any] = response.json()["record"]
        return record

    def update(self, entity_id: str, base_version: int, **fields: Any) -> httpx.Response:
        body = {"entity_id": entity_id, "op": "update", "base_version": base_version,
                "fields": fields}  # fmt: skip
        return self.mutate(body)

    def batch(self, items: list[dict[str, Any]]) -> httpx.Response:
        return self.client.post("/v1/mutations/batch", json={"mutations": items})

    def changes(self, since: str | None = None, limit: int | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {}
        if since is not None:
            params["since"] = since
        if limit is not None:
            params["limit"] = limit
        response = self.client.get("/v1/changes", params=params)
        assert response.status_code == 200, response.text
        page: dict[str, Any] = response.json()
        return page

    def pull(self, since: str | None = None, limit: int = 3) -> tuple[list[Any], str]:
        """Every feed entry after `since` (records and `out_of_scope`), paging by `limit`;
        and the token to go on from."""
        entries: list[Any] = []
        while True:
            page = self.changes(since, limit)
            entries += page["changes"]
            since = page["next"]
            if not page["has_more"]:
                assert since is not None
                return entries, since

    def all_changes(self, limit: int = 100) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        since: str | None = None
        while True:
            page = self.changes(since, limit)
            records.extend(page["changes"])
            since = page["next"]
            if not page["has_more"]:
                return records


def read_feed_while(
    api: ServerApi, writers: list[threading.Thread], *, limit: int, pause_s: float
) -> tuple[list[tuple[str, int]], dict[str, int]]:
    """Page through the changes feed until the writers have finished and it is drained.

    Returns every (id, version) delivered, in order, and the last version seen per id. Each
    page must only move records forward: a repeated or older version fails at once.
    """
    seen: dict[str, int] = {}
    delivered: list[tuple[str, int]] = []
    since = None
    while True:
        writing = any(thread.is_alive() for thread in writers)
        page = api.changes(since, limit=limit)
        for record in page["changes"]:
            delivered.append((record["id"], record["version"]))
            assert record["version"] > seen.get(record["id"], 0)
            seen[record["id"]] = record["version"]
        since = page["next"]
        if not writing and not page["has_more"]:
            return delivered, seen
        if not page["has_more"]:
            time.sleep(pause_s)  # poll like a device would, well inside the rate limit
