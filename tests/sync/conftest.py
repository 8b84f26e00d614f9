"""Fixtures: a device store on a temp dir, and the real server on loopback with two devices.

`server` runs on SQLite; `server_on_each_backend` runs once on SQLite and once on the
throwaway PostgreSQL (a module binds it as its `server` to run every test on both).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.store.store import Store
from server.embedded import EmbeddedServer, start_server
from tests.support.api import ServerApi
from tests.support.postgres import PostgresCluster
from tests.sync.fake_clock import FakeClock
from tests.sync.sync_support import make_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with make_store(tmp_path / "device-a") as opened:
        yield opened


@pytest.fixture
def clock() -> FakeClock:
    """Time for an engine (and `clocked_store`) that moves only as the test moves it."""
    return FakeClock()


@pytest.fixture
def clocked_store(tmp_path: Path, clock: FakeClock) -> Iterator[Store]:
    """A device store whose queue times (retries, leases) follow ``clock``."""
    with make_store(tmp_path / "device-a", clock=clock) as opened:
        yield opened


@pytest.fixture
def other_store(tmp_path: Path) -> Iterator[Store]:
    with make_store(tmp_path / "device-b") as opened:
        yield opened


@pytest.fixture
def server(server_sqlite: str) -> Iterator[EmbeddedServer]:
    with start_server(server_sqlite, rate_limit_per_second=0) as running:
        yield running


_databases = itertools.count()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def server_on_each_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[EmbeddedServer]:
    if request.param == "sqlite":
        url = request.getfixturevalue("server_sqlite")
    else:
        cluster: PostgresCluster = request.getfixturevalue("postgres")
        url = cluster.create_server_database(f"device_{next(_databases)}")
    with start_server(url, rate_limit_per_second=0) as running:
        yield running


# The sync tests' devices are one crew's: a worker's feed carries only its scope (issue 16),
# and work orders one of them (or the office) creates are in the crew's.
CREW = "crew"


@pytest.fixture
def token_a(server: EmbeddedServer) -> str:
    return server.add_device("phone-a", user=CREW)


@pytest.fixture
def token_b(server: EmbeddedServer) -> str:
    return server.add_device("phone-b", user=CREW)


@pytest.fixture
def api_a(server: EmbeddedServer, token_a: str) -> Iterator[ServerApi]:
    api = ServerApi(server.base_url, token_a)
    yield api
    api.close()


@pytest.fixture
def admin_api(server: EmbeddedServer) -> Iterator[ServerApi]:
    api = ServerApi(server.base_url, server.add_device("office", "admin", user=CREW))
    yield api
    api.close()
