"""Fixtures: an embedded server on a temp SQLite database, device tokens, API clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from server.embedded import EmbeddedServer, start_server
from tests.support.api import ServerApi


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'server.sqlite3'}"


@pytest.fixture
def server(sqlite_url: str) -> Iterator[EmbeddedServer]:
    with start_server(sqlite_url) as running:
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
