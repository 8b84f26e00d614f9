"""Search through its index, through real HTTP on SQLite and PostgreSQL: the same matches as the
LIKE rule (substring of title, site or assignee, any ASCII case, deleted ones left out), paged
by cursor, kept in step with every write, and asked of the index, not a scan (issue 16)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from server.db.seed import seed_work_orders
from server.embedded import EmbeddedServer
from tests.support.api import ServerApi

_names = itertools.count()


@pytest.fixture
def office(served: EmbeddedServer) -> Iterator[ServerApi]:
    api = ServerApi(served.base_url, served.add_device("office", "admin"))
    yield api
    api.close()


def search(api: ServerApi, text: str, limit: int) -> list[dict[str, Any]]:
    """Every page of the search for `text`, `limit` at a time."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"q": text, "limit": limit}
        if cursor:
            params["cursor"] = cursor
        answer = api.client.get("/v1/records", params=params)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert len(body["records"]) <= limit
        found += body["records"]
        cursor = body["next_cursor"]
        if cursor is None:
            return found


def like_rule(records: list[dict[str, Any]], text: str) -> list[str]:
    """The ids the LIKE scan finds, in id order (only ASCII letters fold, on both backends for
    the texts used here)."""

    def contains(value: str) -> bool:
        return text.lower() in value.lower() if text.isascii() else text in value

    return sorted(
        r["id"]
        for r in records
        if not r["deleted"] and any(contains(r[f] or "") for f in ("title", "site", "assignee"))
    )


_TEXTS = [
    {"title": "Replace pump seal", "site": "North depot", "assignee": "ana"},
    {"title": "Fence", "site": "PUMP house", "assignee": "ben"},
    {"title": "50% of the valves", "site": "", "assignee": ""},
    {"title": "a_b junction", "site": "back\\slash yard", "assignee": "carl"},
    {"title": 'Say "hi" to the pump', "site": "", "assignee": "ana"},
    {"title": "Überprüfung Pumpe", "site": "Zürich", "assignee": ""},
    {"title": "xy", "site": "", "assignee": "pumpkin"},
    {"title": "Gate", "site": "", "assignee": ""},
]
_QUERIES = [
    "pump", "PuMp", "ump", "um", "p", "50%", "%", "_", "a_b", "\\", '"hi"', 'say "', "Pumpe",
    "Zür", "ü", "house", "nothing like it", "pumpkin", " to ", "xy",
]  # fmt: skip


def test_search_finds_exactly_what_the_like_rule_finds_and_follows_every_write(
    office: ServerApi,
) -> None:
    records = [office.create(**fields) for fields in _TEXTS]
    gone = office.create(title="Deleted pump")
    answer = office.mutate(
        {"entity_id": gone["id"], "op": "delete", "base_version": 1, "fields": {}}
    )
    assert answer.status_code == 200, answer.text
    records.append({**gone, "deleted": True})
    for text in _QUERIES:
        found = search(office, text, limit=2)
        assert [r["id"] for r in found] == like_rule(records, text), text
    # An edit moves a work order out of one search and into another, in the same write.
    fence = records[1]
    changed = office.update(fence["id"], 1, site="Valve house", assignee="pumpkin-team")
    assert changed.status_code == 200, changed.text
    records[1] = changed.json()["record"]
    for text in ("pump", "PUMP house", "valve", "pumpkin"):
        found = search(office, text, limit=3)
        assert [r["id"] for r in found] == like_rule(records, text), text
    assert [r["title"] for r in search(office, "valve house", 5)] == ["Fence"]


def test_a_common_term_and_a_rare_one_page_alike_over_many_work_orders(
    db_url: str, office: ServerApi
) -> None:
    rows = [
        {"title": f"Pump {n}" if n % 37 == 0 else f"Work order {n}", "site": "Depot",
         "assignee": f"user-{n % 40:02d}"}
        for n in range(1500)
    ]  # fmt: skip
    seed_work_orders(db_url, rows, chunk=500)
    everything = office.all_changes(limit=500)
    assert len(everything) == 1500
    for text, limit in (("work order", 200), ("pump", 7), ("user-07", 50), ("depot", 500)):
        found = search(office, text, limit)
        assert [r["id"] for r in found] == like_rule(everything, text), text
    expected = {f"Work order {n}" for n in range(1500) if n % 37 and str(n).startswith("14")}
    assert {r["title"] for r in search(office, "work order 14", 50)} == expected


def test_the_index_answers_the_search(
    db_url: str, office: ServerApi, served: EmbeddedServer
) -> None:
    made = [office.create(title=f"Pump {n}") for n in range(3)]
    office.update(made[0]["id"], 1, title="Valve")
    store = served.store
    if store.is_postgres:
        with store.db.atomic():
            store.db.execute_sql("SET LOCAL enable_seqscan = off")
            plan = store.db.execute_sql(
                "EXPLAIN SELECT id FROM work_order WHERE title ILIKE %s", ("%pump 1%",)
            ).fetchall()
        assert "work_order_title_trgm" in " ".join(line[0] for line in plan)
        return
    # The trigram table holds each work order at its current change number, nothing stale.
    seqs = {
        row[0]
        for row in store.db.execute_sql(
            "SELECT rowid FROM work_order_search WHERE work_order_search MATCH ?", ('"pump"',)
        )
    }
    orders = store.tables.WorkOrder
    current = {row.id: row.seq for row in orders.select()}
    assert seqs == {current[made[1]["id"]], current[made[2]["id"]]}
