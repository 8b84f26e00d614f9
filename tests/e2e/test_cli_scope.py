"""`fieldsync pin`, `unpin`, `search` and `whoami` as a subprocess (issue 16), against the
server on SQLite and on PostgreSQL."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from server.embedded import provision_device
from tests.e2e.conftest import run_cli
from tests.support.api import ServerApi
from tests.support.postgres import PostgresCluster
from tests.support.serve import ServerProcess
from tests.sync.sync_support import closed_port_url

_databases = itertools.count()


def sync_until_idle(data_dir: Path, url: str, token: str) -> None:
    """`fieldsync sync --until-idle` as its own process, as the background worker pulls."""
    synced = run_cli(data_dir, "--server", url, "sync", "--until-idle", "--timeout", "30",
                     token=token)  # fmt: skip
    assert synced.returncode == 0, synced.stderr


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def server_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'server.sqlite3'}"
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    return cluster.create_server_database(f"cli_scope_{next(_databases)}")


def test_search_without_the_server_says_it_needs_a_connection(tmp_path: Path) -> None:
    result = run_cli(
        tmp_path / "device", "--server", closed_port_url(), "search", "pump", token="t"
    )
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("fieldsync: search needs a connection to the server")
    assert result.stdout == ""


def test_search_needs_words(tmp_path: Path) -> None:
    result = run_cli(tmp_path / "device", "--server", closed_port_url(), "search", " ", token="t")
    assert result.returncode == 2
    assert result.stderr.strip() == "fieldsync: search needs some text to look for"


def test_a_pin_made_offline_is_kept_and_shown(tmp_path: Path) -> None:
    data_dir = tmp_path / "device"
    created = run_cli(data_dir, "create", "title=Pump")
    entity = created.stdout.strip()
    result = run_cli(data_dir, "--server", closed_port_url(), "pin", entity, token="t")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"pinned {entity} on this device; the server is out of reach: sent at the next sync"
    )
    listed = run_cli(data_dir, "list", "--scope", "pinned", "--json")
    assert [row["id"] for row in json.loads(listed.stdout)] == [entity]
    assert json.loads(listed.stdout)[0]["pinned"] is True
    assert json.loads(run_cli(data_dir, "list", "--scope", "mine", "--json").stdout) == []


def test_pin_refuses_what_is_not_a_work_order_id(tmp_path: Path) -> None:
    result = run_cli(tmp_path / "device", "--server", closed_port_url(), "pin", "x", token="t")
    assert result.returncode == 2
    assert result.stderr.strip() == "fieldsync: 'x' is not a work-order id (a UUID)"


def test_whoami_before_any_sync_says_what_to_do(tmp_path: Path) -> None:
    result = run_cli(tmp_path / "device", "whoami")
    assert result.returncode == 1
    assert "fieldsync sync" in result.stderr


def test_search_pin_and_whoami_against_the_real_server(
    tmp_path: Path, server_db: str, server_process: ServerProcess
) -> None:
    office = provision_device(server_db, "office", "admin")
    token = provision_device(server_db, "ana-phone", user="ana", team="north")
    api = ServerApi(server_process.base_url, office)
    try:
        hydrants = {api.create(title=f"Hydrant {n}", assignee="zed")["id"] for n in range(3)}
    finally:
        api.close()
    data_dir = tmp_path / "device"
    url = server_process.base_url

    first = run_cli(data_dir, "--server", url, "search", "hydrant", "--limit", "2", "--json",
                    token=token)  # fmt: skip
    assert first.returncode == 0, first.stderr
    page = json.loads(first.stdout)
    assert len(page["records"]) == 2
    assert all(record["available_offline"] is False for record in page["records"])
    rest = run_cli(data_dir, "--server", url, "search", "hydrant", "--json",
                   "--cursor", page["next_cursor"], token=token)  # fmt: skip
    found = [r["id"] for r in page["records"] + json.loads(rest.stdout)["records"]]
    assert sorted(found) == sorted(hydrants)

    pinned = found[0]
    result = run_cli(data_dir, "--server", url, "pin", pinned, token=token)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"pinned {pinned}: kept offline on this device"
    sync_until_idle(data_dir, url, token)
    listed = json.loads(run_cli(data_dir, "list", "--scope", "pinned", "--json").stdout)
    assert [row["id"] for row in listed] == [pinned]
    who = run_cli(data_dir, "whoami")
    assert who.stdout.strip() == "ana-phone: user ana, north, worker"
    text = run_cli(data_dir, "--server", url, "search", "hydrant", token=token)
    line = next(line for line in text.stdout.splitlines() if line.startswith(pinned))
    assert " offline " in line

    unpinned = run_cli(data_dir, "--server", url, "unpin", pinned, token=token)
    assert unpinned.returncode == 0, unpinned.stderr
    assert unpinned.stdout.strip() == f"unpinned {pinned}"
    sync_until_idle(data_dir, url, token)
    assert json.loads(run_cli(data_dir, "list", "--json").stdout) == [], "not zed's: it left"


def test_a_sync_in_another_process_keeps_a_work_order_open_in_the_editor(
    tmp_path: Path, server_db: str, server_process: ServerProcess
) -> None:
    """The background worker (here `fieldsync sync`, its own process) pulls while the app's
    editor shows a work order that the office hands to someone else: it stays."""
    from app.store.editing import hold_for_editing, release_editing
    from app.store.store import Store

    office = provision_device(server_db, "office", "admin")
    token = provision_device(server_db, "ana-phone", user="ana", team="north")
    api = ServerApi(server_process.base_url, office)
    data_dir = tmp_path / "device"
    url = server_process.base_url
    try:
        order = api.create(title="Pump", assignee="ana")
        sync_until_idle(data_dir, url, token)
        with Store(data_dir) as app:
            assert hold_for_editing(app, order["id"]) is True  # the app's editor opens it
            assert api.update(order["id"], order["version"], assignee="bo").status_code == 200
            sync_until_idle(data_dir, url, token)  # another process than this one
            row = app.cache.get(order["id"])
            assert row is not None, "the other process's pull kept it"
            assert row["no_longer_assigned"] is True
            listed = run_cli(data_dir, "list")
            assert "No longer assigned to you" in listed.stdout
            assert release_editing(app, order["id"]) == {order["id"]}
        assert json.loads(run_cli(data_dir, "list", "--json").stdout) == []
    finally:
        api.close()
