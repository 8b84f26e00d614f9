"""A device tells the office how it stands with its pull: counts the server keeps per device."""

from __future__ import annotations

import json

from app.store.store import Store
from app.sync.device_report import MAX_HEADER_CHARS, device_report, encode_report
from server.embedded import EmbeddedServer
from tests.sync.sync_support import Fault, FaultTransport, job_rows, sync_until_idle


def _status_row(server: EmbeddedServer, device: str) -> dict[str, object]:
    tables = server.store.tables
    device_id = tables.Device.get(tables.Device.name == device).id
    row = tables.DeviceStatus.get(tables.DeviceStatus.device_id == device_id)
    return dict(row.__data__)


async def test_the_pull_carries_the_report_and_no_request_of_its_own(
    store: Store, server: EmbeddedServer, token_a: str
) -> None:
    refused = store.record_edit("create", None, {"title": "Refused here"}).entity_id
    transport = FaultTransport()
    # The server refuses the create for good: it becomes a failed change on the phone.
    transport.plan(Fault("status", status=422))
    await sync_until_idle(store, server.base_url, token_a, transport=transport, batch_size=1)
    assert [job["status"] for job in job_rows(store)] == ["dead"]
    pulls = [r for r in transport.requests if r.url.path == "/v1/changes"]
    assert pulls, "the engine pulled"
    sent = json.loads(pulls[0].headers["Fieldsync-Device-Status"])
    assert sent["failed_changes"] == 1
    assert sent["failed"][0]["entity_id"] == refused
    assert sent["failed"][0]["title"] == "Refused here"
    assert sent["app_version"]
    # No request beyond the sync's own: the report rode on the pull.
    paths = {r.url.path for r in transport.requests}
    assert paths <= {"/v1/mutations", "/v1/mutations/batch", "/v1/changes", "/v1/me", "/healthz"}
    row = _status_row(server, "phone-a")
    assert row["failed_changes"] == 1
    assert row["edits_waiting"] == 0
    assert row["last_sync_at"] is not None
    assert json.loads(str(row["failed"]))[0]["entity_id"] == refused


def test_the_report_counts_waiting_edits_and_their_age(store: Store) -> None:
    store.record_edit("create", None, {"title": "One"})
    store.record_edit("create", None, {"title": "Two"})
    report = device_report(store)
    assert report["edits_waiting"] == 2
    assert report["oldest_edit_age_s"] is not None
    assert report["oldest_edit_age_s"] >= 0
    assert report["failed_changes"] == 0
    assert report["uploads_waiting"] == 0
    assert report["failed"] == []


def test_a_long_report_drops_failures_to_fit_a_header() -> None:
    failed = [
        {"entity_id": str(n), "title": "t" * 200, "code": "invalid", "reason": "r" * 200,
         "age_s": 1.0}
        for n in range(40)
    ]  # fmt: skip
    text = encode_report({"edits_waiting": 1, "failed_changes": 40, "failed": failed})
    assert len(text) <= MAX_HEADER_CHARS
    decoded = json.loads(text)
    assert decoded["failed_changes"] == 40
    assert 0 < len(decoded["failed"]) < 40
    assert text.isascii()
