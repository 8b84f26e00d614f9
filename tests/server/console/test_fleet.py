"""The fleet page and the status devices report with their pull, over HTTP."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest

from server.embedded import EmbeddedServer, start_server
from tests.server.console.conftest import ADMIN_PASSWORD
from tests.support.api import ServerApi
from tests.support.console import ConsoleClient, add_office_user

_DAY = 86_400.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fleet_server(sqlite_url: str, clock: Clock) -> Iterator[EmbeddedServer]:
    add_office_user(sqlite_url, "ada", "admin", ADMIN_PASSWORD)
    with start_server(
        sqlite_url, clock=clock, rate_limit_per_second=0, console_sign_in_window_seconds=60
    ) as running:
        yield running


@pytest.fixture
def console(fleet_server: EmbeddedServer) -> Iterator[ConsoleClient]:
    client = ConsoleClient(fleet_server.base_url)
    assert client.sign_in("ada", ADMIN_PASSWORD).status_code == 303
    yield client
    client.close()


def _pull(server: EmbeddedServer, token: str, status: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    if status is not None:
        headers["Fieldsync-Device-Status"] = status
    reply = httpx.get(f"{server.base_url}/v1/changes", headers=headers)
    assert reply.status_code == 200, reply.text
    return reply


def _row(html: str, device: str) -> str:
    found = re.search(rf'<tr data-device="{re.escape(device)}">(.*?)</tr>', html, re.S)
    assert found, f"no row for {device}"
    return found.group(1)


def _cells(row: str) -> list[str]:
    cells = re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in cells]


def _band(row: str) -> str:
    found = re.search(r'data-band="(\w+)"', row)
    assert found
    return found.group(1)


REPORT = {
    "app_version": "0.1.0",
    "edits_waiting": 3,
    "oldest_edit_age_s": 7200,
    "failed_changes": 1,
    "uploads_waiting": 2,
    "failed": [{"entity_id": "x", "code": "invalid", "reason": "title too long", "age_s": 60}],
}


def test_a_report_with_the_pull_fills_the_row(
    fleet_server: EmbeddedServer, console: ConsoleClient
) -> None:
    token = fleet_server.add_device("phone-1", user="ana", team="north")
    _pull(fleet_server, token, json.dumps(REPORT))
    row = _row(console.get("/console/devices").text, "phone-1")
    assert _cells(row) == [
        "phone-1", "ana", "north", "worker", "0.1.0", "just now", "just now · on time",
        "3", "2 h", "1", "2",
    ]  # fmt: skip
    assert _band(row) == "good"


def test_the_last_sync_is_coloured_by_its_age(
    fleet_server: EmbeddedServer, console: ConsoleClient, clock: Clock
) -> None:
    fresh = fleet_server.add_device("fresh")
    late = fleet_server.add_device("late")
    stale = fleet_server.add_device("stale")
    fleet_server.add_device("never")
    _pull(fleet_server, stale)
    clock.now += 6 * _DAY
    _pull(fleet_server, late)
    clock.now += 2 * _DAY
    _pull(fleet_server, fresh)
    clock.now += 3600
    console.sign_in("ada", ADMIN_PASSWORD)  # the first session ended days ago
    html = console.get("/console/devices").text
    assert _band(_row(html, "fresh")) == "good"
    assert _band(_row(html, "late")) == "amber"
    assert _band(_row(html, "stale")) == "bad"
    assert "8 d ago" in _row(html, "stale")
    never = _row(html, "never")
    assert _band(never) == "never"
    assert _cells(never)[5:7] == ["Never", "Never · never synced"]


def test_the_thresholds_come_from_the_settings(sqlite_url: str, clock: Clock) -> None:
    add_office_user(sqlite_url, "ada", "admin", ADMIN_PASSWORD)
    with start_server(
        sqlite_url, clock=clock, console_sync_amber_seconds=60, console_sync_red_seconds=600
    ) as server:
        token = server.add_device("phone-1")
        _pull(server, token)
        clock.now += 120
        client = ConsoleClient(server.base_url)
        client.sign_in("ada", ADMIN_PASSWORD)
        assert _band(_row(client.get("/console/devices").text, "phone-1")) == "amber"
        clock.now += 600
        assert _band(_row(client.get("/console/devices").text, "phone-1")) == "bad"
        client.close()


def test_an_unfinished_pull_is_seen_but_not_a_sync(
    fleet_server: EmbeddedServer, console: ConsoleClient, admin_token: str, clock: Clock
) -> None:
    token = fleet_server.add_device("phone-1", "admin")
    headers = {"Authorization": f"Bearer {token}"}
    reply = httpx.get(f"{fleet_server.base_url}/v1/changes?limit=1", headers=headers)
    assert reply.json()["has_more"] is True
    clock.now += 300
    cells = _cells(_row(console.get("/console/devices").text, "phone-1"))
    assert cells[5:7] == ["5 min ago", "Never · never synced"]


@pytest.fixture
def admin_token(fleet_server: EmbeddedServer) -> str:
    """An admin device with two work orders, so a one-record page has more to come."""
    token = fleet_server.add_device("office", "admin")
    api = ServerApi(fleet_server.base_url, token)
    api.create(title="One")
    api.create(title="Two")
    api.close()
    return token


@pytest.mark.parametrize(
    "header",
    ["not json", json.dumps({"edits_waiting": -1}), json.dumps([1]), "x" * 9000],
    ids=["not-json", "negative", "not-an-object", "too-long"],
)
def test_an_unreadable_report_is_ignored_and_the_pull_goes_on(
    fleet_server: EmbeddedServer, console: ConsoleClient, header: str
) -> None:
    token = fleet_server.add_device("phone-1")
    _pull(fleet_server, token, json.dumps(REPORT))
    _pull(fleet_server, token, header)
    cells = _cells(_row(console.get("/console/devices").text, "phone-1"))
    # What the server saw is there; the earlier report stands.
    assert cells[6] == "just now · on time"
    assert cells[7] == "3"


def test_sorted_by_a_column_and_filtered_by_team(
    fleet_server: EmbeddedServer, console: ConsoleClient
) -> None:
    for name, team, waiting in (("a", "north", 5), ("b", "south", 1), ("c", "north", 9)):
        token = fleet_server.add_device(name, team=team)
        _pull(fleet_server, token, json.dumps({"edits_waiting": waiting}))
    fleet_server.add_device("d", team="north")  # never reported: last either way

    def order(query: str) -> list[str]:
        return re.findall(
            r'<tr data-device="(\w+)">', console.get(f"/console/devices?{query}").text
        )

    assert order("sort=waiting&order=desc") == ["c", "a", "b", "d"]
    assert order("sort=waiting&order=asc") == ["b", "a", "c", "d"]
    assert order("team=north&sort=device&order=desc") == ["d", "c", "a"]
    assert order("team=south") == ["b"]


def test_the_table_refreshes_itself_and_reads_without_javascript(
    fleet_server: EmbeddedServer, console: ConsoleClient
) -> None:
    fleet_server.add_device("phone-1")
    page = console.get("/console/devices?team=")
    assert '<script src="/console/static/htmx.min.js"' in page.text
    assert 'hx-trigger="every 10s"' in page.text
    assert '<tr data-device="phone-1">' in page.text  # the rows are in the page itself
    fragment = console.get("/console/devices", headers={"HX-Request": "true"})
    assert fragment.text.lstrip().startswith('<div id="fleet"')
    assert "<html" not in fragment.text
    htmx = console.get("/console/static/htmx.min.js")
    assert htmx.status_code == 200
    assert "htmx" in htmx.text[:200]


def test_revoked_devices_leave_the_fleet(
    fleet_server: EmbeddedServer, console: ConsoleClient
) -> None:
    fleet_server.add_device("phone-1")
    fleet_server.add_device("phone-2")
    from server.auth import revoke_device

    revoke_device(fleet_server.store, "phone-2")
    html = console.get("/console/devices").text
    assert 'data-device="phone-1"' in html
    assert 'data-device="phone-2"' not in html


def test_the_openapi_documents_the_status_header(fleet_server: EmbeddedServer) -> None:
    document = httpx.get(f"{fleet_server.base_url}/openapi.json").json()
    parameters = document["paths"]["/v1/changes"]["get"]["parameters"]
    [header] = [p for p in parameters if p["name"] == "Fieldsync-Device-Status"]
    assert header["in"] == "header"
    assert header["required"] is False
    assert "edits_waiting" in header["description"]


def test_a_large_fleet_is_paged_and_sorted_over_all(
    fleet_server: EmbeddedServer, console: ConsoleClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from server.console import fleet

    monkeypatch.setattr(fleet, "PAGE_ROWS", 2)
    for name in ("e", "d", "c", "b", "a"):
        fleet_server.add_device(name)
    first = console.get("/console/devices").text
    assert re.findall(r'<tr data-device="(\w+)">', first) == ["a", "b"]
    assert "5 active devices, page 1 of 3" in first
    last = console.get("/console/devices?page=3&order=desc").text
    assert re.findall(r'<tr data-device="(\w+)">', last) == ["a"]
    assert "Previous page" in last
    assert "Next page" not in last
