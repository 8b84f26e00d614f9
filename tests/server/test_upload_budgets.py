"""Upload budgets: a device's unfinished uploads and a user's stored files are bounded (507
while full, 413 for a file no budget could hold), `list-devices` shows each device's use, and
`serve` takes the budgets as flags."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.cli import main
from server.embedded import EmbeddedServer, provision_device, start_server
from tests.support.api import ServerApi, new_id
from tests.support.serve import ServerProcess
from tests.support.tus import create_upload, file_metadata, patch, upload_whole

MIB = 1024 * 1024
FILE = os.urandom(MIB + MIB // 2)


@pytest.fixture
def budgeted(sqlite_url: str) -> Iterator[EmbeddedServer]:
    with start_server(
        sqlite_url,
        rate_limit_per_second=0,
        device_unfinished_bytes=2 * MIB,
        user_stored_bytes=4 * MIB,
    ) as running:
        yield running


def device(server: EmbeddedServer, name: str, user: str) -> ServerApi:
    return ServerApi(server.base_url, server.add_device(name, "worker", user=user))


def test_a_device_may_not_pass_its_budget_of_unfinished_uploads(
    budgeted: EmbeddedServer,
) -> None:
    phone = ServerApi(budgeted.base_url, budgeted.add_device("phone-1", "worker"))
    try:
        record = phone.create()
        first = create_upload(phone.client, len(FILE), file_metadata(record["id"], FILE))
        assert first.status_code == 201
        other = os.urandom(len(FILE))
        refused = create_upload(phone.client, len(other), file_metadata(record["id"], other))
        assert refused.status_code == 507
        assert refused.json()["error"] == "upload_budget_exceeded"
        assert "2.0 MiB" in refused.json()["detail"]
        huge = os.urandom(3 * MIB)
        never = create_upload(phone.client, len(huge), file_metadata(record["id"], huge))
        assert never.status_code == 413
        assert never.json()["error"] == "payload_too_large"
        # Once the first upload is finished, the budget has room again.
        assert patch(phone.client, first.headers["Location"], 0, FILE).status_code == 204
        again = create_upload(phone.client, len(other), file_metadata(record["id"], other))
        assert again.status_code == 201
    finally:
        phone.close()


def test_a_user_may_not_pass_the_budget_of_stored_files(budgeted: EmbeddedServer) -> None:
    """The budget counts every device of the user; another user's device is not held back,
    and removing an attachment gives its room back."""
    laptop, phone, other = (
        device(budgeted, "ana-laptop", "ana"),
        device(budgeted, "ana-phone", "ana"),
        device(budgeted, "ben-phone", "ben"),
    )
    try:
        record = laptop.create()
        upload_whole(laptop.client, record["id"], FILE, chunk=MIB)
        upload_whole(laptop.client, record["id"], os.urandom(len(FILE)), chunk=MIB)
        third = os.urandom(len(FILE))
        refused = create_upload(phone.client, len(third), file_metadata(record["id"], third))
        assert refused.status_code == 507
        assert refused.json()["error"] == "storage_budget_exceeded"
        assert "ana" in refused.json()["detail"]
        theirs = create_upload(other.client, len(third), file_metadata(record["id"], third))
        assert theirs.status_code == 201
        attachments = laptop.client.get(f"/v1/records/{record['id']}").json()["record"][
            "attachments"
        ]
        removed = laptop.client.delete(
            f"/v1/attachments/{attachments[0]['id']}", headers={"Idempotency-Key": new_id()}
        )
        assert removed.status_code == 200, removed.text
        again = create_upload(phone.client, len(third), file_metadata(record["id"], third))
        assert again.status_code == 201
    finally:
        for api in (laptop, phone, other):
            api.close()


def test_list_devices_shows_each_devices_use(
    budgeted: EmbeddedServer, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    phone = device(budgeted, "ana-phone", "ana")
    try:
        record = phone.create()
        upload_whole(phone.client, record["id"], FILE, chunk=MIB)
        waiting = os.urandom(MIB // 2)
        create_upload(phone.client, len(waiting), file_metadata(record["id"], waiting))
    finally:
        phone.close()
    budgeted.add_device("idle", "worker")
    capsys.readouterr()
    assert main(["list-devices", "--db", sqlite_url]) == 0
    rows = {line.split("\t")[0]: line.split("\t") for line in capsys.readouterr().out.splitlines()}
    assert rows["ana-phone"][7:] == ["uploading 0.5 MiB", "stored 1.5 MiB"]
    assert rows["idle"][7:] == ["uploading 0.0 MiB", "stored 0.0 MiB"]


def test_serve_takes_the_budgets_as_flags(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'server.sqlite3'}"
    flags = ("--device-unfinished-mib", "1", "--user-stored-mib", "8", "--min-free-disk-mib", "1")
    with ServerProcess(db, *flags) as server:
        api = ServerApi(server.base_url, provision_device(db, "phone-1"))
        try:
            record = api.create()
            created = create_upload(api.client, len(FILE), file_metadata(record["id"], FILE))
            assert created.status_code == 413
            assert "1.0 MiB" in created.json()["detail"]
        finally:
            api.close()
