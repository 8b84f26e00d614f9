"""`fieldsync` as a subprocess: sync gives up on time when the server is down, a missing
credential or bad input is one clear line, an import is all or nothing, and a worker whose
token is refused exits saying so."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from server.embedded import provision_device
from tests.e2e.conftest import cli_env, fieldsync_command, run_cli
from tests.support.api import ServerApi
from tests.support.serve import ServerProcess
from tests.sync.sync_support import closed_port_url


def test_sync_until_idle_times_out_when_the_server_is_down(tmp_path: Path) -> None:
    data_dir = tmp_path / "device"
    assert run_cli(data_dir, "create", "title=Pump").returncode == 0
    started = time.monotonic()
    result = run_cli(
        data_dir, "--server", closed_port_url(), "sync", "--until-idle", "--timeout", "2",
        token="service-token",
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    # ... and why: what the engine last met.
    assert lines[-1].startswith("fieldsync: not idle before the timeout (pending 1): ")
    assert len(lines[-1]) > len("fieldsync: not idle before the timeout (pending 1): ")
    assert not [line for line in lines if "Traceback" in line]
    assert elapsed < 15  # the timeout, the stop grace and the interpreter start


def test_sync_without_any_credential_says_what_to_do(tmp_path: Path) -> None:
    result = run_cli(tmp_path / "device", "--server", closed_port_url(), "sync", "--until-idle")
    assert result.returncode == 1  # the device lacks something; the command line was fine
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("fieldsync: ")
    assert "FIELDSYNC_TOKEN" in line


def test_sync_until_idle_exits_zero_once_delivered(
    tmp_path: Path, server_process: ServerProcess, device_token: str
) -> None:
    data_dir = tmp_path / "device"
    assert run_cli(data_dir, "create", "title=Pump").returncode == 0
    result = run_cli(
        data_dir, "--server", server_process.base_url, "sync", "--until-idle", "--timeout", "30",
        token=device_token,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "idle: done 1"
    assert device_token not in result.stdout + result.stderr


def test_sync_says_what_it_sent_and_received_as_the_app_does(
    tmp_path: Path, server_db: str, server_process: ServerProcess, device_token: str
) -> None:
    office = ServerApi(server_process.base_url, provision_device(server_db, "office"))
    try:
        # Assigned to the device's person: a worker's feed holds its scope only (issue 16).
        office.create(title="Fence", assignee="phone-e2e")
        office.create(title="Gate", assignee="phone-e2e")
    finally:
        office.close()
    data_dir = tmp_path / "device"
    for title in ("Pump", "Valve", "Hose"):
        assert run_cli(data_dir, "create", f"title={title}").returncode == 0
    url = server_process.base_url
    first = run_cli(data_dir, "--server", url, "sync", token=device_token)
    assert first.returncode == 0, first.stderr
    # Its own three come back in the feed too; only the office's two are news here.
    assert first.stdout.strip() == "3 sent, 2 received"
    listed = run_cli(data_dir, "list", "--json", token=device_token)
    assert sorted(row["title"] for row in json.loads(listed.stdout)) == [
        "Fence", "Gate", "Hose", "Pump", "Valve",
    ]  # fmt: skip
    again = run_cli(data_dir, "--server", url, "sync", token=device_token)
    assert (again.returncode, again.stdout.strip()) == (0, "0 sent, 0 received")


def test_sync_with_the_server_down_says_why_and_keeps_the_edit(tmp_path: Path) -> None:
    data_dir = tmp_path / "device"
    assert run_cli(data_dir, "create", "title=Pump").returncode == 0
    result = run_cli(
        data_dir, "--server", closed_port_url(), "sync", "--timeout", "20", token="service-token"
    )
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("fieldsync: Not synced: the server is unreachable.")
    assert result.stdout == ""
    pending = json.loads(run_cli(data_dir, "list", "--json").stdout)
    assert [(row["title"], row["pending_edits"]) for row in pending] == [("Pump", 1)]


def test_sync_with_a_refused_token_says_sign_in(
    tmp_path: Path, server_process: ServerProcess
) -> None:
    data_dir = tmp_path / "device"
    result = run_cli(
        data_dir, "--server", server_process.base_url, "sync", token="not-a-device-token"
    )
    assert result.returncode == 3
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("fieldsync: Not synced: signed out. Sign in to sync.")


# -- what a review of the command line found -----------------------------------------------


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_bad_environment_and_arguments_get_one_line_not_a_traceback(tmp_path: Path) -> None:
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("x")
    result = run_cli(a_file, "status")
    assert result.returncode == 1
    assert one_line(result).startswith(f"fieldsync: cannot use {a_file} as the data directory")

    data_dir = tmp_path / "device"
    for args in (
        ("--server", "http://127.0.0.1:99999", "sync"),
        ("--server", "http://127.0.0.1:abc", "sync"),
        ("list", "--limit", "99999999999999999999"),
        ("dead", "show", "99999999999999999999"),
        ("sync", "--batch-size", "0"),
        ("sync", "--timeout", "0"),
    ):
        result = run_cli(data_dir, *args, token="service-token")
        assert result.returncode == 2, (args, result.stderr)
        assert "Traceback" not in result.stderr, args

    # Bytes that are not UTF-8 in an argument (a Latin-1 terminal).
    raw = subprocess.run(
        [*fieldsync_command(), "--data-dir", str(data_dir), "list", "--search", b"\xff"],
        capture_output=True,
        env=cli_env(None),
        timeout=60,
        check=False,
    )
    assert raw.returncode == 2
    assert raw.stderr.strip() == b"fieldsync: argument 5 is not valid UTF-8 text"


def test_a_bad_line_imports_nothing_and_names_its_line(tmp_path: Path) -> None:
    data_dir = tmp_path / "device"
    source = tmp_path / "orders.jsonl"
    good = [json.dumps({"title": f"Order {n}"}) for n in range(600)]
    lines = ["", "", *good[:3], json.dumps({"title": "x", "priority": "urgent"}), *good[3:]]
    source.write_text("\n".join(lines) + "\n")
    result = run_cli(data_dir, "import", str(source))
    assert result.returncode == 2
    line = one_line(result)
    assert line.startswith(f"fieldsync: {source}:6: priority")  # the file's line, not the record's
    assert line.endswith("(nothing was imported)")
    assert json.loads(run_cli(data_dir, "list", "--json").stdout) == []

    lines[5] = json.dumps({"title": "x", "priority": "high"})
    source.write_text("\n".join(lines) + "\n")
    assert run_cli(data_dir, "import", str(source)).returncode == 0
    assert len(json.loads(run_cli(data_dir, "list", "--json").stdout)) == 601, "no duplicates"

    source.write_bytes(b'{"title": "caf\xe9"}\n')
    result = run_cli(data_dir, "import", str(source))
    assert (result.returncode, one_line(result)) == (2, f"fieldsync: {source}:1: not UTF-8 text")
    source.write_text("[" * 100_000 + "\n")
    result = run_cli(data_dir, "import", str(source))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_json_piped_into_a_reader_that_stops_early_is_not_an_error(tmp_path: Path) -> None:
    data_dir = tmp_path / "device"
    source = tmp_path / "orders.jsonl"
    source.write_text("".join(json.dumps({"title": f"Order {n}"}) + "\n" for n in range(3000)))
    assert run_cli(data_dir, "import", str(source)).returncode == 0
    with subprocess.Popen(
        [*fieldsync_command(), "--data-dir", str(data_dir), "list", "--json", "--limit", "3000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(None),
    ) as listing:
        assert listing.stdout is not None
        assert listing.stderr is not None
        listing.stdout.read(100)
        listing.stdout.close()  # as `| head -c 100` does
        err = listing.stderr.read()
        listing.wait(timeout=60)
    assert b"Traceback" not in err
    assert listing.returncode == 141


def test_worker_with_a_refused_token_exits_saying_so(
    tmp_path: Path, server_process: ServerProcess
) -> None:
    # Before: it logged httpx's "401 Unauthorized" once and idled for good, so neither a
    # person nor systemd's Restart=on-failure knew; a later `login` never reached it.
    data_dir = tmp_path / "device"
    assert run_cli(data_dir, "create", "title=Pump").returncode == 0
    result = run_cli(
        data_dir, "--server", server_process.base_url, "worker",
        token="fst_revoked", timeout=60,
    )  # fmt: skip
    assert result.returncode == 3
    assert "fieldsync: worker stopped: " in result.stderr
    assert "fieldsync login" in result.stderr
    assert "fst_revoked" not in result.stdout + result.stderr
