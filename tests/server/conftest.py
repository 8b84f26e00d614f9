"""Fixtures: an embedded server on a temp SQLite database, device tokens, API clients."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from server.embedded import EmbeddedServer, start_server
from tests.support.api import ServerApi
from tests.support.postgres import PostgresCluster


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'server.sqlite3'}"


@pytest.fixture
def server(server_sqlite: str) -> Iterator[EmbeddedServer]:
    with start_server(server_sqlite) as running:
        yield running


@pytest.fixture
def make_api(server: EmbeddedServer) -> Iterator[Callable[..., ServerApi]]:
    clients: list[ServerApi] = []

    def make(name: str, role: str = "worker") -> ServerApi:
        api = ServerApi(server.base_url, server.add_device(name, role))  # type: ignore[arg-type]
        clients.append(api)
        return api

    yield make
    for api in clients:
        api.close()


@pytest.fixture
def api(make_api: Callable[..., ServerApi]) -> ServerApi:
    return make_api("phone-1")


@pytest.fixture
def admin(make_api: Callable[..., ServerApi]) -> ServerApi:
    return make_api("office", "admin")


_databases = itertools.count()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh server database on each backend."""
    if request.param == "sqlite":
        url: str = request.getfixturevalue("server_sqlite")
        return url
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    return cluster.create_server_database(f"server_{next(_databases)}")


@pytest.fixture
def served(db_url: str) -> Iterator[EmbeddedServer]:
    """A server without a rate limit on `db_url`."""
    with start_server(db_url, rate_limit_per_second=0) as running:
        yield running
