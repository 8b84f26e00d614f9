"""A work order's history over HTTP: devices' and the console's changes, each logged once."""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from typing import Any

import pytest

from server.embedded import EmbeddedServer, start_server
from tests.support.api import ServerApi, create_body
from tests.support.console import ConsoleClient, add_office_user

PASSWORD = "admin password 1"


@pytest.fixture
def office_on(db_url: str) -> Iterator[EmbeddedServer]:
    """An office server on SQLite and on PostgreSQL, with the admin "ada"."""
    add_office_user(db_url, "ada", "admin", PASSWORD)
    with start_server(db_url, rate_limit_per_second=0) as running:
        yield running


@pytest.fixture
def console(office_on: EmbeddedServer) -> Iterator[ConsoleClient]:
    client = ConsoleClient(office_on.base_url)
    assert client.sign_in("ada", PASSWORD).status_code == 303
    yield client
    client.close()


@pytest.fixture
def phone(office_on: EmbeddedServer) -> Iterator[ServerApi]:
    api = ServerApi(office_on.base_url, office_on.add_device("ana-phone", user="ana"))
    yield api
    api.close()


def _log(server: EmbeddedServer, entity_id: str) -> list[dict[str, Any]]:
    log = server.store.tables.WorkOrderChange
    query = log.select().where(log.entity_id == entity_id).order_by(log.version, log.id)
    return [
        {"version": row.version, "kind": row.kind, "source": row.source, "actor": row.actor,
         "device": row.device, "device_id": row.device_id, "fields": json.loads(row.fields)}
        for row in query
    ]  # fmt: skip


def _device_id(server: EmbeddedServer, name: str) -> int:
    devices = server.store.tables.Device
    return int(devices.get(devices.name == name).id)


def test_a_devices_update_and_its_replay_are_logged_once_with_before_and_after(
    office_on: EmbeddedServer, phone: ServerApi, console: ConsoleClient
) -> None:
    record = phone.create(title="Pump", status="open")
    body = {"entity_id": record["id"], "op": "update", "base_version": 1,
            "fields": {"status": "done"}}  # fmt: skip
    first = phone.mutate(body, key="edit-1")
    again = phone.mutate(body, key="edit-1")
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.headers.get("Idempotent-Replayed") == "true"
    device_id = _device_id(office_on, "ana-phone")
    log = _log(office_on, record["id"])
    assert [(entry["version"], entry["kind"]) for entry in log] == [(1, "create"), (2, "update")]
    assert log[1] == {"version": 2, "kind": "update", "source": "device", "actor": "ana",
                      "device": "ana-phone", "device_id": device_id,
                      "fields": {"status": ["open", "done"]}}  # fmt: skip
    assert log[0]["fields"]["title"] == [None, "Pump"]

    page = html.unescape(console.get(f"/console/work-orders/{record['id']}").text)
    assert "Changed</strong> by ana on ana-phone, from the device (version 2)" in page
    assert "Status: open → done" in page
    assert "Created</strong> by ana on ana-phone, from the device (version 1)" in page
    assert page.index("Status: open → done") < page.index("Title: (empty) → Pump")  # newest first
    # The create's blank fields (site, notes, ...) were empty before and after: no line says so.
    assert "(empty) → (empty)" not in page


def test_a_batchs_items_are_logged_in_order_and_a_replayed_batch_adds_nothing(
    office_on: EmbeddedServer, phone: ServerApi, console: ConsoleClient
) -> None:
    made = create_body(title="Valve", priority="normal")
    entity = made["entity_id"]
    items = [
        {**made, "idempotency_key": "b-1"},
        {"entity_id": entity, "op": "update", "base_version": 1, "idempotency_key": "b-2",
         "fields": {"priority": "high", "site": "Gate 3"}},
        {"entity_id": entity, "op": "update", "base_version": 2, "idempotency_key": "b-3",
         "fields": {"status": "in_progress"}},
    ]  # fmt: skip
    reply = phone.batch(items)
    assert [result["status"] for result in reply.json()["results"]] == [201, 200, 200]
    replayed = phone.batch(items)
    assert [result["replayed"] for result in replayed.json()["results"]] == [True] * 3
    log = _log(office_on, entity)
    assert [(entry["version"], entry["kind"], entry["device"]) for entry in log] == [
        (1, "create", "ana-phone"), (2, "update", "ana-phone"), (3, "update", "ana-phone"),
    ]  # fmt: skip
    assert log[1]["fields"] == {"priority": ["normal", "high"], "site": ["", "Gate 3"]}
    assert log[2]["fields"] == {"status": ["open", "in_progress"]}

    page = html.unescape(console.get(f"/console/work-orders/{entity}").text)
    assert "Priority: normal → high" in page
    assert "Site: (empty) → Gate 3" in page
    assert "Status: open → in_progress" in page

    audit = html.unescape(console.get("/console/audit?who=ana-phone&action=work_order").text)
    assert audit.count("work_order.update") == 2
    assert "work_order.create" in audit
    export = console.get("/console/audit?action=work_order.update&format=csv").text
    assert export.count("ana (ana-phone),device,work_order.update") == 2


def test_a_console_reassign_and_a_delete_are_logged_with_who_made_them(
    office_on: EmbeddedServer, phone: ServerApi, console: ConsoleClient
) -> None:
    record = phone.create(title="Hatch", assignee="ana")
    moved = console.post(
        "/console/work-orders/reassign", {"ids": [record["id"]], "new_assignee": "bo"}
    )
    assert moved.status_code == 303, moved.text
    deleted = phone.mutate({"entity_id": record["id"], "op": "delete", "base_version": 2})
    assert deleted.status_code == 200, deleted.text
    log = _log(office_on, record["id"])
    assert log[1] == {"version": 2, "kind": "update", "source": "console", "actor": "ada",
                      "device": "", "device_id": None,
                      "fields": {"assignee": ["ana", "bo"]}}  # fmt: skip
    page = html.unescape(console.get(f"/console/work-orders/{record['id']}").text)
    assert "Changed</strong> by ada, from the console (version 2)" in page
    assert "Assignee: ana → bo" in page
    assert (log[2]["kind"], log[2]["fields"]) == ("delete", {"deleted": [False, True]})
    assert "Deleted</strong> by ana on ana-phone, from the device (version 3)" in page
    assert "Deleted: no → yes" in page
    # The console's own edits stay out of the device entries of the audit.
    audit = console.get("/console/audit?format=csv").text
    assert "ada,device,work_order" not in audit


def test_a_rolled_back_reassignment_logs_nothing(
    office_on: EmbeddedServer, phone: ServerApi, console: ConsoleClient
) -> None:
    record = phone.create(title="Door", assignee="ana")
    refused = console.post(
        "/console/work-orders/reassign",
        {"ids": [record["id"], "00000000-0000-4000-8000-000000000000"], "new_assignee": "bo",
         "confirm_count": "2"},
    )  # fmt: skip
    assert refused.status_code == 404
    assert [entry["kind"] for entry in _log(office_on, record["id"])] == ["create"]


def test_a_conflict_decided_in_the_console_is_logged_as_the_admins(
    office_on: EmbeddedServer, phone: ServerApi, console: ConsoleClient
) -> None:
    record = phone.create(title="Pump", priority="normal")
    raised = phone.client.post(
        "/v1/conflicts", headers={"Idempotency-Key": "c1"},
        json={"entity_id": record["id"], "base_version": 1, "mine": {"priority": "high"}},
    )  # fmt: skip
    assert raised.status_code == 201, raised.text
    conflict_id = raised.json()["conflict"]["id"]
    decided = console.post(
        f"/console/conflicts/{conflict_id}/resolve",
        {"choice_priority": "device", "base_version": "1"},
    )
    assert decided.status_code == 303, decided.text
    log = _log(office_on, record["id"])
    assert log[1] == {"version": 2, "kind": "update", "source": "conflict", "actor": "ada",
                      "device": "", "device_id": None,
                      "fields": {"priority": ["normal", "high"]}}  # fmt: skip
    page = html.unescape(console.get(f"/console/work-orders/{record['id']}").text)
    assert "Changed</strong> by ada, from the conflict (version 2)" in page
    assert "Priority: normal → high" in page


def test_the_console_names_fields_as_the_phone_does() -> None:
    # One table of labels and value words (`app.words`) for the phone's screens and the
    # console: its history and its form.
    from app.words import FIELD_LABELS
    from server.console.change_words import field_words
    from server.console.render import templates
    from ui import wording

    assert wording.FIELD_LABELS is FIELD_LABELS
    changed = {"notes": [None, ""], "due_date": [None, "2026-12-24"], "deleted": [False, True]}
    assert field_words(changed) == ["Due date: (empty) → 2026-12-24", "Deleted: no → yes"]
    form = templates.get_template("_work_order_fields.html").render(
        values={}, statuses=[], priorities=[]
    )
    labels = [FIELD_LABELS[name] for name in ("title", "site", "due_date", "notes")]
    assert all(f">{label}</label>" in form for label in labels)
