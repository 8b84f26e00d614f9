"""Fixtures: a server with two office users (an admin and a dispatcher) and console clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from server.embedded import EmbeddedServer, start_server
from tests.support.console import ConsoleClient, add_office_user

ADMIN_PASSWORD = "admin password 1"
DISPATCHER_PASSWORD = "dispatcher password 1"


@pytest.fixture
def office(sqlite_url: str) -> Iterator[EmbeddedServer]:
    add_office_user(sqlite_url, "ada", "admin", ADMIN_PASSWORD)
    add_office_user(sqlite_url, "dan", "dispatcher", DISPATCHER_PASSWORD)
    with start_server(sqlite_url, rate_limit_per_second=0) as running:
        yield running


@pytest.fixture
def make_client(office: EmbeddedServer) -> Iterator[Callable[[], ConsoleClient]]:
    clients: list[ConsoleClient] = []

    def make() -> ConsoleClient:
        client = ConsoleClient(office.base_url)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def admin_console(make_client: Callable[[], ConsoleClient]) -> ConsoleClient:
    client = make_client()
    assert client.sign_in("ada", ADMIN_PASSWORD).status_code == 303
    return client


@pytest.fixture
def dispatcher_console(make_client: Callable[[], ConsoleClient]) -> ConsoleClient:
    client = make_client()
    assert client.sign_in("dan", DISPATCHER_PASSWORD).status_code == 303
    return client
