"""`fieldsync-server` subcommands: add-device, list-devices, revoke-device, prune-keys."""

from __future__ import annotations

import subprocess

import pytest

from server.cli import main
from tests.support.serve import server_command


def test_add_device_prints_the_token_alone_on_the_last_line(sqlite_url: str) -> None:
    result = subprocess.run(
        [*server_command(), "add-device", "--db", sqlite_url, "--name", "phone-1"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    token = result.stdout.rstrip("\n").splitlines()[-1]
    assert token.startswith("fst_")
    assert " " not in token
    assert len(token) > 40


def test_list_and_revoke(sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["add-device", "--db", sqlite_url, "--name", "office", "--role", "admin"]) == 0
    assert main(["add-device", "--db", sqlite_url, "--name", "phone-1"]) == 0
    assert main(["add-device", "--db", sqlite_url, "--name", "phone-1"]) == 1
    capsys.readouterr()
    assert main(["list-devices", "--db", sqlite_url]) == 0
    listed = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [(row[0], row[1], row[3]) for row in listed] == [
        ("office", "admin", "active"),
        ("phone-1", "worker", "active"),
    ]
    assert main(["revoke-device", "--db", sqlite_url, "phone-1"]) == 0
    assert main(["revoke-device", "--db", sqlite_url, "phone-1"]) == 1
    capsys.readouterr()
    main(["list-devices", "--db", sqlite_url])
    assert "revoked" in capsys.readouterr().out.splitlines()[1]


def test_db_defaults_to_the_environment(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FIELDSYNC_SERVER_DB", sqlite_url)
    assert main(["add-device", "--name", "phone-9"]) == 0
    capsys.readouterr()
    main(["list-devices", "--db", sqlite_url])
    assert capsys.readouterr().out.startswith("phone-9\tworker")


def test_prune_keys(sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prune-keys", "--db", sqlite_url]) == 0
    assert "Pruned 0" in capsys.readouterr().out


def test_unknown_role_is_refused(sqlite_url: str) -> None:
    with pytest.raises(SystemExit):
        main(["add-device", "--db", sqlite_url, "--name", "x", "--role", "root"])


@pytest.mark.parametrize("workers", ["0", "-2", "many"])
def test_serve_refuses_a_worker_count_below_one(
    sqlite_url: str, workers: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--db", sqlite_url, "--workers", workers])
    assert "--workers" in capsys.readouterr().err


def test_a_device_belongs_to_a_user_and_a_team(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["add-device", "--db", sqlite_url, "--name", "ana-phone", "--user", "ana",
                 "--team", "north"]) == 0  # fmt: skip
    assert main(["add-device", "--db", sqlite_url, "--name", "ana-laptop", "--user", "ana"]) == 0
    assert main(["add-device", "--db", sqlite_url, "--name", "ben"]) == 0
    capsys.readouterr()
    assert main(["list-devices", "--db", sqlite_url]) == 0
    listed = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [(row[0], row[4], row[5]) for row in listed] == [
        ("ana-laptop", "ana", ""),
        ("ana-phone", "ana", "north"),
        ("ben", "ben", ""),
    ]


def test_a_team_with_control_characters_is_refused(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["add-device", "--db", sqlite_url, "--name", "x", "--team", "a\x07b"]) == 2
    assert "team must not contain control characters" in capsys.readouterr().err


def test_set_device_refuses_what_add_device_refuses_and_keeps_the_device(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["add-device", "--db", sqlite_url, "--name", "phone-1", "--team", "north"]) == 0
    capsys.readouterr()
    assert main(["set-device", "--db", sqlite_url, "phone-1", "--team", "a\x07b"]) == 2
    assert "cannot change device: team must not contain control characters" in (
        capsys.readouterr().err
    )
    main(["list-devices", "--db", sqlite_url])
    [row] = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert (row[0], row[4], row[5]) == ("phone-1", "phone-1", "north")


def test_set_device_changes_the_user_and_team(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["add-device", "--db", sqlite_url, "--name", "phone-1", "--team", "north"]) == 0
    assert main(["set-device", "--db", sqlite_url, "phone-1", "--user", "ana", "--team", ""]) == 0
    assert main(["set-device", "--db", sqlite_url, "nobody", "--team", "x"]) == 1
    assert main(["set-device", "--db", sqlite_url, "phone-1"]) == 2
    capsys.readouterr()
    main(["list-devices", "--db", sqlite_url])
    [row] = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert (row[0], row[4], row[5]) == ("phone-1", "ana", "")
