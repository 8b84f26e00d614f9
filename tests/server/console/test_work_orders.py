"""Work orders over HTTP: create, edit, search and filters, reassigning many with a count."""

from __future__ import annotations

import re

from server.embedded import EmbeddedServer
from tests.support.api import ServerApi
from tests.support.console import ConsoleClient


def _create(console: ConsoleClient, **fields: str) -> str:
    reply = console.post("/console/work-orders/new", {"title": "Pump", **fields})
    assert reply.status_code == 303, reply.text
    return reply.headers["location"].rsplit("/", 1)[1]


def _listed(console: ConsoleClient, query: str) -> list[str]:
    html = console.get(f"/console/work-orders?{query}").text
    return re.findall(r'<tr data-entity="([^"]+)">', html)


def test_a_dispatcher_creates_and_edits_a_work_order(
    office: EmbeddedServer, dispatcher_console: ConsoleClient
) -> None:
    entity = _create(dispatcher_console, site="Gate 3", assignee="ana", team="north")
    row = office.store.tables.WorkOrder.get_by_id(entity)
    assert (row.title, row.site, row.assignee, row.version) == ("Pump", "Gate 3", "ana", 1)
    assert (row.updated_by, row.created_by) == ("dan (console)", "dan")
    edited = dispatcher_console.post(
        f"/console/work-orders/{entity}",
        {"base_version": "1", "title": "Pump seal", "status": "in_progress", "due_date": ""},
    )
    assert edited.status_code == 303
    row = office.store.tables.WorkOrder.get_by_id(entity)
    assert (row.title, row.status, row.version) == ("Pump seal", "in_progress", 2)
    history = dispatcher_console.get(f"/console/work-orders/{entity}").text
    assert "work_order.create" in history
    assert "work_order.edit" in history


def test_an_edit_over_a_newer_version_is_refused(
    office: EmbeddedServer, admin_console: ConsoleClient
) -> None:
    entity = _create(admin_console)
    admin_console.post(f"/console/work-orders/{entity}", {"base_version": "1", "title": "B"})
    stale = admin_console.post(
        f"/console/work-orders/{entity}", {"base_version": "1", "title": "C"}
    )
    assert stale.status_code == 409
    assert "The work order changed meanwhile" in stale.text
    assert office.store.tables.WorkOrder.get_by_id(entity).title == "B"


def test_what_the_rules_refuse_is_said_and_nothing_is_made(
    office: EmbeddedServer, admin_console: ConsoleClient
) -> None:
    reply = admin_console.post("/console/work-orders/new", {"title": " ", "status": "bogus"})
    assert reply.status_code == 422
    assert 'role="alert"' in reply.text
    assert "status" in reply.text
    assert office.store.tables.WorkOrder.select().count() == 0
    no_token = admin_console.http.post("/console/work-orders/new", data={"title": "X"})
    assert no_token.status_code == 403
    assert office.store.tables.WorkOrder.select().count() == 0


def test_search_and_filters(office: EmbeddedServer, admin_console: ConsoleClient) -> None:
    api = ServerApi(office.base_url, office.add_device("office", "admin"))
    pump = api.create(title="Replace pump seal", team="north", assignee="ana")["id"]
    valve = api.create(title="Valve pump check", team="south", assignee="bo", status="done")["id"]
    roof = api.create(title="Roof", team="north", assignee="bo")["id"]
    api.close()
    assert sorted(_listed(admin_console, "q=pump")) == sorted([pump, valve])
    assert _listed(admin_console, "q=pump&team=north") == [pump]
    assert sorted(_listed(admin_console, "assignee=bo")) == sorted([valve, roof])
    assert _listed(admin_console, "status=done") == [valve]
    assert _listed(admin_console, "q=nothing-like-it") == []


def test_a_bulk_reassignment_asks_for_the_count(
    office: EmbeddedServer, admin_console: ConsoleClient
) -> None:
    ids = [_create(admin_console, assignee="ana") for _ in range(3)]
    picked = {"ids": ids[:2], "new_assignee": "bo"}
    refused = admin_console.post("/console/work-orders/reassign", picked)
    assert refused.status_code == 422
    assert "This changes 2 work orders: type 2 to confirm." in refused.text
    wrong = admin_console.post("/console/work-orders/reassign", {**picked, "confirm_count": "3"})
    assert wrong.status_code == 422
    orders = office.store.tables.WorkOrder
    assert {row.assignee for row in orders.select()} == {"ana"}
    done = admin_console.post("/console/work-orders/reassign", {**picked, "confirm_count": "2"})
    assert done.status_code == 303
    assert {row.id: row.assignee for row in orders.select()} == {
        ids[0]: "bo",
        ids[1]: "bo",
        ids[2]: "ana",
    }
    # One alone needs no count.
    one = admin_console.post(
        "/console/work-orders/reassign", {"ids": [ids[2]], "new_team": "south"}
    )
    assert one.status_code == 303
    assert orders.get_by_id(ids[2]).team == "south"
