"""Fixtures for every test directory: the throwaway PostgreSQL cluster, started once per
process, the server's SQLite schema, migrated once per process and copied per test, and cheap
office password hashes in this process."""

from __future__ import annotations

import shutil
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import argon2
import pytest

from tests.support.postgres import PostgresCluster, PostgresUnavailable, running_postgres

_CHEAP_HASHER = argon2.PasswordHasher.from_parameters(argon2.profiles.CHEAPEST)


@pytest.fixture(autouse=True)
def cheap_password_hashes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Office passwords hashed by servers in this process with argon2id's cheapest parameters,
    as Django's test settings swap in a fast hasher: at the product's, every hash and every
    sign-in costs 0.2 s of CPU, and a console test makes three. Servers run as a subprocess,
    and tests marked `product_password_hashes`, keep the product's hasher."""
    users = sys.modules.get("server.console.users")
    if users is None or request.node.get_closest_marker("product_password_hashes"):
        return
    monkeypatch.setattr(users, "_hasher", _CHEAP_HASHER)
    monkeypatch.setattr(users, "_NOBODY", _CHEAP_HASHER.hash("no such user"))


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
