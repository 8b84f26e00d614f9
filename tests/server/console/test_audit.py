"""The audit over HTTP: console changes and devices' review requests, filtered, as CSV."""

from __future__ import annotations

import csv
import io

from server.embedded import EmbeddedServer
from tests.support.api import ServerApi
from tests.support.console import ConsoleClient


def test_who_did_what_from_the_console_and_from_devices(
    office: EmbeddedServer, admin_console: ConsoleClient
) -> None:
    token = office.add_device("phone-1", user="ana")
    admin_console.post("/console/people/devices", {"name": "phone-2"})
    admin_console.post("/console/people/devices/phone-2/revoke")
    phone = ServerApi(office.base_url, token)
    record = phone.create(title="Pump", assignee="ana")
    raised = phone.client.post(
        "/v1/conflicts", headers={"Idempotency-Key": "k"},
        json={"entity_id": record["id"], "base_version": 1, "mine": {"title": "P"}},
    )  # fmt: skip
    assert raised.status_code == 201
    phone.close()

    html = admin_console.get("/console/audit").text
    for words in ("device.add", "device.revoke", "conflict.raised", "phone-1", "ada"):
        assert words in html
    only = admin_console.get("/console/audit?action=device.revoke").text
    assert "device.revoke" in only
    assert "device.add" not in only
    by_phone = admin_console.get("/console/audit?who=phone-1").text
    assert "conflict.raised" in by_phone
    assert "device.add" not in by_phone

    export = admin_console.get("/console/audit?format=csv")
    assert export.status_code == 200
    assert export.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(export.text)))
    assert {(row["who"], row["action"]) for row in rows} == {
        ("ada", "device.add"), ("ada", "device.revoke"), ("phone-1", "conflict.raised"),
        ("ana (phone-1)", "work_order.create"),
    }  # fmt: skip
    assert all(not row["detail"].count("fst_") for row in rows)


def test_a_time_range_and_a_bad_date(admin_console: ConsoleClient) -> None:
    admin_console.post("/console/people/devices", {"name": "phone-2"})
    assert "device.add" in admin_console.get("/console/audit?since=2000-01-01").text
    assert "device.add" not in admin_console.get("/console/audit?until=2000-01-01").text
    bad = admin_console.get("/console/audit?since=yesterday")
    assert bad.status_code == 422
    assert "Dates are YYYY-MM-DD." in bad.text


def test_a_device_edit_reads_as_it_always_did(
    office: EmbeddedServer, admin_console: ConsoleClient
) -> None:
    """The change log stores compact JSON now; the audit shows each edit's fields spaced and
    sorted, with its words as written, as it did when the log stored that text itself."""
    phone = ServerApi(office.base_url, office.add_device("phone-1", user="ana"))
    record = phone.create(title="Pompe", site="Dépôt 4")
    body = {"entity_id": record["id"], "op": "update", "base_version": 1,
            "fields": {"status": "done", "notes": "Joint changé"}}  # fmt: skip
    assert phone.mutate(body, key="edit-1").status_code == 200
    phone.close()
    export = admin_console.get("/console/audit?format=csv&action=work_order.update")
    [row] = list(csv.DictReader(io.StringIO(export.text)))
    assert row["detail"] == '{"notes": ["", "Joint changé"], "status": ["open", "done"]}'
