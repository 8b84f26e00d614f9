"""Fixtures for every test directory: the throwaway PostgreSQL cluster, started once per
process, and the server's SQLite schema, migrated once per process and copied per test."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.postgres import PostgresCluster, PostgresUnavailable, running_postgres


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    try:
        with running_postgres() as cluster:
            yield cluster
    except PostgresUnavailable as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture(scope="session")
def server_schema(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file holding the server's schema as `open_store` leaves a new one, in one
    file (no WAL beside it) so that a plain copy is the whole database."""
    from server.db.store import open_store  # the server, only for tests that use it

    path = tmp_path_factory.mktemp("server-schema") / "server.sqlite3"
    open_store(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=DELETE")  # the server turns WAL on again
    return path


@pytest.fixture
def server_sqlite(tmp_path: Path, server_schema: Path) -> str:
    """`sqlite:///<tmp_path>/server.sqlite3` holding the server's schema: a copy of the
    session's, since every schema step again for each test costs more than the copy."""
    target = tmp_path / "server.sqlite3"
    shutil.copyfile(server_schema, target)
    return f"sqlite:///{target}"
