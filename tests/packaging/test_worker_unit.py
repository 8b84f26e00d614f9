"""The systemd user unit runs the headless worker, restarts it, and never waits for a network."""

from __future__ import annotations

import configparser
import tomllib

from packaging_support import ROOT, WORKER_UNIT


def _unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(WORKER_UNIT, encoding="utf-8")
    return parser


def test_runs_the_worker_subcommand_of_the_cli() -> None:
    exec_start = _unit()["Service"]["ExecStart"].split()
    assert exec_start == ["fieldsync", "worker"]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert exec_start[0] in pyproject["project"]["scripts"]


def test_restarts_on_failure_with_a_pause() -> None:
    unit = _unit()
    assert unit["Service"]["Restart"] == "on-failure"
    assert 5 <= int(unit["Service"]["RestartSec"]) <= 300
    # Never give up: the lock may be held by the app for hours.
    assert unit["Unit"]["StartLimitIntervalSec"] == "0"


def test_offline_first_no_network_dependency() -> None:
    unit = _unit()["Unit"]
    for key in ("After", "Wants", "Requires", "BindsTo", "Requisite"):
        assert "network-online.target" not in unit.get(key, ""), key
        assert "network.target" not in unit.get(key, ""), key


def test_is_a_user_unit_started_with_the_session() -> None:
    unit = _unit()
    assert unit["Install"]["WantedBy"] == "default.target"
    assert "User" not in unit["Service"], "a user unit runs as its user already"
