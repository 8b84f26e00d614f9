"""Failed changes and conflicts over HTTP: what they list, and who may decide with what form."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from server.embedded import EmbeddedServer
from tests.support.api import ServerApi
from tests.support.console import ConsoleClient


@pytest.fixture
def conflict(office: EmbeddedServer) -> tuple[int, str]:
    """An open conflict on a work order (at version 1) raised by a worker's phone."""
    token = office.add_device("phone-1", user="ana", team="north")
    phone = ServerApi(office.base_url, token)
    record = phone.create(title="Pump", assignee="ana")
    raised = phone.client.post(
        "/v1/conflicts",
        headers={"Idempotency-Key": "k1"},
        json={"entity_id": record["id"], "base_version": 1, "mine": {"title": "Pump (A)",
              "priority": "high"}, "note": "which?"},
    )  # fmt: skip
    assert raised.status_code == 201, raised.text
    phone.close()
    return int(raised.json()["conflict"]["id"]), str(record["id"])


def test_the_queue_lists_open_conflicts(
    admin_console: ConsoleClient, conflict: tuple[int, str]
) -> None:
    conflict_id, _ = conflict
    html = admin_console.get("/console/conflicts").text
    assert f'data-conflict="{conflict_id}"' in html
    assert "priority, title" in html
    assert "ana" in html
    assert (
        f'data-conflict="{conflict_id}"'
        not in admin_console.get("/console/conflicts?status=resolved").text
    )


def test_before_is_what_the_device_says_its_edit_started_from(
    office: EmbeddedServer, admin_console: ConsoleClient
) -> None:
    token = office.add_device("phone-2", user="bo")
    phone = ServerApi(office.base_url, token)
    record = phone.create(title="Roof", assignee="bo")
    phone.update(record["id"], 1, title="Roof (server)")
    raised = phone.client.post(
        "/v1/conflicts",
        headers={"Idempotency-Key": "k2"},
        json={"entity_id": record["id"], "base_version": 1, "mine": {"title": "Roof (B)"},
              "base": {"title": "Roof"}},
    )  # fmt: skip
    phone.close()
    assert raised.status_code == 201, raised.text
    assert raised.json()["conflict"]["base"] == {"title": "Roof"}
    html = admin_console.get(f"/console/conflicts/{raised.json()['conflict']['id']}").text
    row = re.search(r'<tr data-field="title">(.*?)</tr>', html, re.S)
    assert row
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", row[1], re.S)]
    assert cells[:4] == ["title", "Roof", "Roof (B)", "Roof (server)"]


def test_a_decision_needs_the_csrf_token(
    office: EmbeddedServer, admin_console: ConsoleClient, conflict: tuple[int, str]
) -> None:
    conflict_id, _ = conflict
    for action in ("resolve", "dismiss"):
        reply = admin_console.http.post(
            f"/console/conflicts/{conflict_id}/{action}",
            data={"choice_title": "device", "choice_priority": "server", "base_version": "1"},
        )
        assert reply.status_code == 403
    assert office.store.tables.Conflict.get_by_id(conflict_id).status == "open"


def test_a_dispatcher_sees_the_queue_but_does_not_decide(
    dispatcher_console: ConsoleClient, conflict: tuple[int, str]
) -> None:
    conflict_id, _ = conflict
    page = dispatcher_console.get(f"/console/conflicts/{conflict_id}")
    assert page.status_code == 200
    assert "Only an admin decides conflicts." in page.text
    reply = dispatcher_console.post(f"/console/conflicts/{conflict_id}/dismiss")
    assert reply.status_code == 403


def test_keep_one_value_per_field_and_the_feed_carries_it(
    office: EmbeddedServer, admin_console: ConsoleClient, conflict: tuple[int, str]
) -> None:
    conflict_id, entity = conflict
    reply = admin_console.post(
        f"/console/conflicts/{conflict_id}/resolve",
        {"choice_title": "server", "choice_priority": "device", "base_version": "1"},
    )
    assert reply.status_code == 303
    detail = admin_console.get(reply.headers["location"]).text
    assert "Resolved by ada (console)" in detail
    record = office.store.tables.WorkOrder.get_by_id(entity)
    assert (record.title, record.priority, record.version) == ("Pump", "high", 2)
    # Deciding twice is refused in words, and changes nothing.
    again = admin_console.post(f"/console/conflicts/{conflict_id}/dismiss")
    assert again.status_code == 409
    assert "Someone already decided this conflict." in again.text


def test_a_typed_value_the_rules_refuse_keeps_the_conflict_open(
    office: EmbeddedServer, admin_console: ConsoleClient, conflict: tuple[int, str]
) -> None:
    conflict_id, entity = conflict
    reply = admin_console.post(
        f"/console/conflicts/{conflict_id}/resolve",
        {"choice_title": "other", "value_title": "x" * 201, "choice_priority": "device",
         "base_version": "1"},
    )  # fmt: skip
    assert reply.status_code == 422
    assert re.search(r'role="alert">title: .*200 characters', reply.text)
    assert office.store.tables.WorkOrder.get_by_id(entity).version == 1
    missing = admin_console.post(
        f"/console/conflicts/{conflict_id}/resolve", {"choice_title": "device", "base_version": "1"}
    )
    assert missing.status_code == 422
    assert "priority: choose" in missing.text


def test_the_record_moved_meanwhile(
    office: EmbeddedServer, admin_console: ConsoleClient, conflict: tuple[int, str]
) -> None:
    conflict_id, _ = conflict
    reply = admin_console.post(
        f"/console/conflicts/{conflict_id}/resolve",
        {"choice_title": "device", "choice_priority": "device", "base_version": "7"},
    )
    assert reply.status_code == 409
    assert "The work order changed meanwhile" in reply.text


def test_failed_changes_are_listed_per_phone(
    office: EmbeddedServer, admin_console: ConsoleClient
) -> None:
    for name, title in (("phone-1", "Gate valve"), ("phone-2", "Roof")):
        token = office.add_device(name, user=name.replace("phone", "person"))
        report = {"failed_changes": 1, "failed": [
            {"entity_id": f"id-{name}", "title": title, "code": "invalid",
             "reason": "The server refused it", "age_s": 7200}]}  # fmt: skip
        httpx.get(
            f"{office.base_url}/v1/changes",
            headers={"Authorization": f"Bearer {token}",
                     "Fieldsync-Device-Status": json.dumps(report)},
        )  # fmt: skip
    html = admin_console.get("/console/failed").text
    assert "2 failed changes" in html
    assert 'data-entity="id-phone-1"' in html
    assert "The server refused it" in html
    assert "2 h ago" in html
    only = admin_console.get("/console/failed?device=phone-2").text
    assert 'data-entity="id-phone-1"' not in only
    assert 'data-entity="id-phone-2"' in only
