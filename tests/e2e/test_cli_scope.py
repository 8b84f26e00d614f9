"""`fieldsync pin`, `unpin`, `search` and `whoami` as a subprocess (issue 16)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import run_cli
from tests.sync.sync_support import closed_port_url


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
