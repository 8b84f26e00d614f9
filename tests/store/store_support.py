"""Helpers shared by the store tests: an injected clock, an older schema, file fingerprints,
child processes."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.store import db as db_module
from app.store import migrations

REPO_ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

#: A fixed start so tests never depend on the real time of day.
EPOCH = 1_700_000_000.0


class FakeClock:
    """The clock the queue reads; tests move it by hand (trio's autojump_clock, by hand)."""

    def __init__(self, now: float = EPOCH) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def set(self, now: float) -> None:
        self.now = now


def at_schema(monkeypatch: pytest.MonkeyPatch, version: int) -> None:
    """Open stores as the release that knew migrations up to ``version`` did."""
    monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:version])
    monkeypatch.setattr(migrations, "LATEST_VERSION", version)
    monkeypatch.setattr(db_module, "LATEST_VERSION", version)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sidecars(path: Path) -> list[str]:
    """SQLite files that would appear next to `path` if anything opened it for writing."""
    return sorted(
        p.name for p in path.parent.iterdir() if p.name.startswith(path.name) and p != path
    )


def child_env(data_dir: Path) -> dict[str, str]:
    """Environment for a child process: never the real XDG data dir."""
    env = dict(os.environ)
    env["FIELDSYNC_DATA_DIR"] = str(data_dir)
    env["XDG_DATA_HOME"] = str(data_dir / "xdg")
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.pop("PYTHONWARNINGS", None)
    return env


def run_python(
    args: list[str], data_dir: Path, *, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        env=child_env(data_dir),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def rows(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Read the database with plain sqlite3, independent of the code under test."""
    conn = sqlite3.connect(path, timeout=30)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()
