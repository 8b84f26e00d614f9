"""`fieldsync attach`, `attachments` and `detach` as a subprocess (issue 15's contract)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.e2e.conftest import run_cli
from tests.support.serve import ServerProcess


def test_attach_prints_the_id_last_and_attachments_lists_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "device"
    entity = run_cli(data_dir, "create", "title=Pump").stdout.strip().splitlines()[-1]
    source = tmp_path / "IMG_0001.JPG"
    source.write_bytes(b"\xff\xd8" + bytes(range(256)) * 400)

    attached = run_cli(data_dir, "attach", entity, str(source), "--filename", "meter.jpg")
    assert attached.returncode == 0, attached.stderr
    attachment_id = attached.stdout.strip().splitlines()[-1]

    listed = run_cli(data_dir, "attachments", entity, "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert row["id"] == attachment_id
    assert row["filename"] == "meter.jpg"
    assert row["size"] == source.stat().st_size
    assert row["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert row["state"] == "waiting"
    text = run_cli(data_dir, "attachments", entity).stdout
    assert attachment_id in text
    assert "waiting" in text
    assert "meter.jpg" in text

    status = json.loads(run_cli(data_dir, "status", "--json").stdout)
    assert status["uploads"] == {
        "waiting": 1,
        "failed": 0,
        "bytes_waiting": source.stat().st_size,
    }

    detached = run_cli(data_dir, "detach", attachment_id)
    assert detached.returncode == 0, detached.stderr
    assert json.loads(run_cli(data_dir, "attachments", entity, "--json").stdout) == []
    assert json.loads(run_cli(data_dir, "status", "--json").stdout)["uploads"]["waiting"] == 0


def test_attaching_what_is_not_a_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    data_dir = tmp_path / "device"
    entity = run_cli(data_dir, "create", "title=Pump").stdout.strip().splitlines()[-1]
    for path in (tmp_path, tmp_path / "missing.jpg"):
        result = run_cli(data_dir, "attach", entity, str(path))
        assert result.returncode == 2
        [line] = result.stderr.strip().splitlines()
        assert line.startswith("fieldsync: ")
    assert json.loads(run_cli(data_dir, "attachments", entity, "--json").stdout) == []
    unknown = run_cli(data_dir, "attachments", "no-such-order")
    assert unknown.returncode == 2


def test_sync_until_idle_finishes_the_upload(
    tmp_path: Path, server_process: ServerProcess, device_token: str
) -> None:
    data_dir = tmp_path / "device"
    entity = run_cli(data_dir, "create", "title=Pump").stdout.strip().splitlines()[-1]
    source = tmp_path / "reading.txt"
    source.write_bytes(b"meter 0042517 kWh\n" * 200_000)  # 3.6 MB: several chunks
    attachment_id = run_cli(data_dir, "attach", entity, str(source)).stdout.split()[-1]
    result = run_cli(
        data_dir, "--server", server_process.base_url, "sync", "--until-idle", "--timeout", "60",
        token=device_token,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    [row] = json.loads(run_cli(data_dir, "attachments", entity, "--json").stdout)
    assert (row["id"], row["state"], row["offset"]) == (attachment_id, "uploaded", row["size"])
    status = json.loads(run_cli(data_dir, "status", "--json").stdout)
    assert status["uploads"] == {"waiting": 0, "failed": 0, "bytes_waiting": 0}
