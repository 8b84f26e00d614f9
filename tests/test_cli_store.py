"""The `fieldsync` command line over the local store, run as a real subprocess."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DB_FILENAME = "fieldsync.sqlite3"


def fieldsync(data_dir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["FIELDSYNC_DATA_DIR"] = str(data_dir)
    env["XDG_DATA_HOME"] = str(data_dir / "xdg")  # never the real data dir
    env["PYTHONPATH"] = str(REPO_ROOT)
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "--data-dir", str(data_dir), *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check:
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
    return result


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(result.stdout)


def assert_one_line_refusal(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("fieldsync: ")
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in lines[0]


def test_edit_cycle_and_json_shapes(tmp_path: Path) -> None:
    data_dir = tmp_path / "device"
    created = fieldsync(data_dir, "create", "title=Pump seal", "site=North yard", "priority=high")
    entity_id = created.stdout.strip()
    assert str(uuid.UUID(entity_id)) == entity_id
    other = fieldsync(data_dir, "create", "title=Fence", "status=in_progress").stdout.strip()

    assert (
        fieldsync(data_dir, "edit", entity_id, "notes=bring gasket", "due_date=2025-03-01").stdout
        == ""
    )
    shown = as_json(fieldsync(data_dir, "show", entity_id, "--json"))
    assert shown["id"] == entity_id
    assert shown["title"] == "Pump seal"
    assert shown["site"] == "North yard"
    assert shown["priority"] == "high"
    assert shown["notes"] == "bring gasket"
    assert shown["due_date"] == "2025-03-01"
    assert shown["deleted"] is False
    assert shown["pending_edits"] == 2
    assert shown["origin"] == "local"
    assert shown["server_version"] is None

    listed = as_json(fieldsync(data_dir, "list", "--json"))
    assert isinstance(listed, list)
    assert {row["id"] for row in listed} == {entity_id, other}
    assert all({"id", "title", "status", "pending_edits"} <= set(row) for row in listed)
    filtered = as_json(fieldsync(data_dir, "list", "--json", "--status", "in_progress"))
    assert [row["id"] for row in filtered] == [other]

    assert fieldsync(data_dir, "delete", other).stdout == ""
    assert [row["id"] for row in as_json(fieldsync(data_dir, "list", "--json"))] == [entity_id]
    assert as_json(fieldsync(data_dir, "show", other, "--json"))["deleted"] is True

    status = as_json(fieldsync(data_dir, "status", "--json"))
    # create, create, edit, delete: four queued edits, none sent yet
    assert status["queue_depth"] == {"pending": 4, "leased": 0, "done": 0, "dead": 0, "conflict": 0}
    assert isinstance(status["oldest_pending_age_s"], int | float)
    assert status["oldest_pending_age_s"] >= 0
    assert status["attempt_histogram"]["0"] == 4
    assert sum(status["attempt_histogram"].values()) == 4
    assert status["lease_timeouts"] == 0
    files = [data_dir / (DB_FILENAME + suffix) for suffix in ("", "-wal", "-shm")]
    on_disk = sum(f.stat().st_size for f in files if f.exists())
    assert 0 < status["database_size_bytes"] <= on_disk + 1_000_000


def test_status_json_on_an_empty_device(tmp_path: Path) -> None:
    status = as_json(fieldsync(tmp_path / "device", "status", "--json"))
    assert set(status) >= {
        "queue_depth",
        "oldest_pending_age_s",
        "attempt_histogram",
        "lease_timeouts",
        "database_size_bytes",
    }
    assert set(status["queue_depth"]) == {"pending", "leased", "done", "dead", "conflict"}
    assert not any(status["queue_depth"].values())
    assert status["oldest_pending_age_s"] is None
    assert status["database_size_bytes"] > 0


def test_import_jsonl(tmp_path: Path) -> None:
    data_dir = tmp_path / "device"
    good = tmp_path / "good.jsonl"
    given_id = str(uuid.uuid4())
    good.write_text(
        json.dumps({"title": "One"})
        + "\n\n"
        + json.dumps({"id": given_id, "title": "Two", "site": "Depot"})
        + "\n"
    )
    imported = as_json(fieldsync(data_dir, "import", str(good), "--json"))
    assert imported["created"] == 2
    assert given_id in imported["ids"]
    assert as_json(fieldsync(data_dir, "status", "--json"))["queue_depth"]["pending"] == 2

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"title": "Three"}) + "\n{not json\n")
    assert_one_line_refusal(fieldsync(data_dir, "import", str(bad), check=False), ":2:", "JSON")


BAD_INPUT = {
    "unknown field": (["create", "title=x", "colour=red"], ["colour"]),
    "bad enum": (["create", "title=x", "status=finished"], ["status"]),
    "missing title": (["create", "site=North"], ["title"]),
    "not field=value": (["create", "title"], ["field=value"]),
    "edit bad id": (["edit", "not-a-uuid", "title=x"], ["not-a-uuid"]),
    "show unknown id": (["show", "9b2f6a57-4be4-4ce0-8a39-8d7a2a1e0b6e"], ["9b2f"]),
    "import missing file": (["import", "/nonexistent/records.jsonl"], ["cannot read"]),
}


@pytest.mark.parametrize(("args", "words"), BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_exits_nonzero_with_one_line(
    tmp_path: Path, args: list[str], words: list[str]
) -> None:
    data_dir = tmp_path / "device"
    result = fieldsync(data_dir, *args, check=False)
    assert_one_line_refusal(result, *words)
    assert result.returncode == 2
    path = data_dir / DB_FILENAME
    if path.exists():
        conn = sqlite3.connect(path)
        try:
            queued = conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
            cached = conn.execute("SELECT COUNT(*) FROM work_orders").fetchone()[0]
        finally:
            conn.close()
        assert (queued, cached) == (0, 0), "a refused command writes nothing"


def test_corrupt_database_is_reported_not_overwritten(tmp_path: Path) -> None:
    data_dir = tmp_path / "device"
    data_dir.mkdir()
    path = data_dir / DB_FILENAME
    path.write_bytes(b"definitely not a database\n" * 100)
    before = path.read_bytes()
    result = fieldsync(data_dir, "status", "--json", check=False)
    assert_one_line_refusal(result, str(path), "left untouched")
    assert result.returncode == 1
    assert path.read_bytes() == before
    assert sorted(p.name for p in data_dir.iterdir()) == [DB_FILENAME]
