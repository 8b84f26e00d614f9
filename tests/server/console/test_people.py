"""People over HTTP: add a device (token once, QR code), revoke, set its person, view as it."""

from __future__ import annotations

import re

import httpx

from server.console.models import console_tables
from server.embedded import EmbeddedServer
from tests.support.api import ServerApi
from tests.support.console import ConsoleClient


def _token(html: str) -> str:
    found = re.search(r'<output id="token" class="token">(fst_[^<]+)</output>', html)
    assert found, "no token on the page"
    return found.group(1)


def test_an_added_device_gets_its_token_once_with_a_qr_code(
    office: EmbeddedServer, admin_console: ConsoleClient
) -> None:
    reply = admin_console.post(
        "/console/people/devices", {"name": "phone-9", "user": "ana", "team": "north",
                                    "role": "worker"}
    )  # fmt: skip
    assert reply.status_code == 200
    token = _token(reply.text)
    assert "<svg" in reply.text
    assert "This token is shown only now." in reply.text
    me = httpx.get(f"{office.base_url}/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert me.status_code == 200
    assert me.json()["user"] == "ana"
    assert me.json()["team"] == "north"
    # Never again: the People page and the audit hold no token.
    people = admin_console.get("/console/people").text
    assert token not in people
    assert 'data-device="phone-9"' in people
    audit = console_tables(office.store).Audit
    [entry] = audit.select()
    assert (entry.actor, entry.action, entry.subject) == ("ada", "device.add", "phone-9")
    assert token not in entry.detail


def test_a_name_taken_or_refused_says_why(admin_console: ConsoleClient) -> None:
    assert admin_console.post("/console/people/devices", {"name": "p1"}).status_code == 200
    taken = admin_console.post("/console/people/devices", {"name": "p1"})
    assert taken.status_code == 409
    assert "A device named &#39;p1&#39; exists already" in taken.text
    empty = admin_console.post("/console/people/devices", {"name": ""})
    assert empty.status_code == 422
    assert "Cannot add the device: device name must be 1-100 characters." in empty.text


def test_a_revoked_device_gets_401_on_its_next_request(
    office: EmbeddedServer, admin_console: ConsoleClient
) -> None:
    token = office.add_device("phone-1")
    phone = ServerApi(office.base_url, token)
    assert phone.client.get("/v1/changes").status_code == 200
    reply = admin_console.post("/console/people/devices/phone-1/revoke")
    assert reply.status_code == 303
    assert phone.client.get("/v1/changes").status_code == 401
    phone.close()
    assert "Revoked" in admin_console.get("/console/people").text


def test_people_changes_need_an_admin_and_the_token(
    office: EmbeddedServer, dispatcher_console: ConsoleClient, admin_console: ConsoleClient
) -> None:
    token = office.add_device("phone-1")
    assert dispatcher_console.post("/console/people/devices/phone-1/revoke").status_code == 403
    assert dispatcher_console.post("/console/people/devices", {"name": "x"}).status_code == 403
    no_token = admin_console.http.post("/console/people/devices/phone-1/revoke", data={})
    assert no_token.status_code == 403
    me = httpx.get(f"{office.base_url}/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert me.status_code == 200


def test_set_the_person_and_view_as_the_device(
    office: EmbeddedServer, admin_console: ConsoleClient
) -> None:
    office_api = ServerApi(office.base_url, office.add_device("office", "admin"))
    north = office_api.create(title="North pump", team="north")
    mine = office_api.create(title="Bo's valve", assignee="bo")
    office_api.close()
    office.add_device("phone-1", user="ana")
    before = admin_console.get("/console/people/devices/phone-1/scope").text
    assert "Nothing in its scope." in before
    reply = admin_console.post("/console/people/devices/phone-1", {"user": "bo", "team": "north"})
    assert reply.status_code == 303
    after = admin_console.get("/console/people/devices/phone-1/scope").text
    assert f'data-entity="{north["id"]}"' in after
    assert f'data-entity="{mine["id"]}"' in after
    assert "2 work orders in its scope" in after
    assert "Its searches and single reads reach every work order" in after
    admin_view = admin_console.get("/console/people/devices/office/scope").text
    assert "Its feed carries every work order." in admin_view


def test_view_as_holds_what_the_person_keeps_offline(
    office: EmbeddedServer, admin_console: ConsoleClient
) -> None:
    office_api = ServerApi(office.base_url, office.add_device("office", "admin"))
    elsewhere = office_api.create(title="Far away", team="south")
    office_api.close()
    phone = ServerApi(office.base_url, office.add_device("phone-1", user="ana", team="north"))
    assert (
        "Nothing in its scope." in admin_console.get("/console/people/devices/phone-1/scope").text
    )
    assert phone.client.post(f"/v1/pins/{elsewhere['id']}").status_code in (200, 201)
    phone.close()
    html = admin_console.get("/console/people/devices/phone-1/scope").text
    assert f'data-entity="{elsewhere["id"]}"' in html
