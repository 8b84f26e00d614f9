"""Fixtures for every test directory: the throwaway PostgreSQL cluster, started once per
process, the server's SQLite schema, migrated once per process and copied per test, and cheap
office password hashes in this process."""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import sqlite3
import ssl
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import argon2
import httpx._transports.default as httpx_transports
import pytest

from tests.support.postgres import PostgresCluster, PostgresUnavailable, running_postgres

# Nothing a test starts writes under the real home: a server on PostgreSQL without
# `--attachments-dir` keeps its files in the XDG data dir (server.uploads.blobs), and every such
# server of a run shared that one folder, across workers and runs. Each test process (and all it
# starts) gets a data dir of its own instead, removed when it ends.
_DATA_HOME = tempfile.mkdtemp(prefix="fieldsync-xdg-data-")
os.environ["XDG_DATA_HOME"] = _DATA_HOME
atexit.register(shutil.rmtree, _DATA_HOME, ignore_errors=True)

#: Where the tests that start many programs each live: run first, spread over the workers.
_HEAVY_DIRS = ("tests/benchmarks/", "tests/chaos/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, deal the heavy tests (slow ones, benchmark smoke runs, chaos) to the
    front of every worker's share. `worksteal` hands each worker a contiguous third of this
    list and steals from the back of it; in collection order the heavy tests (benchmarks and
    chaos sort early) all fell to the first worker, one after the other, minutes of them."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers < 2:
        return
    root = str(config.rootpath)

    def heavy(item: pytest.Item) -> bool:
        where = str(item.path).removeprefix(root).lstrip("/")
        return where.startswith(_HEAVY_DIRS) or item.get_closest_marker("slow") is not None

    front = [item for item in items if heavy(item)]
    rest = [item for item in items if not heavy(item)]
    # The shares `worksteal` sends first: len // workers, then of what is left, and so on.
    sizes, left = [], len(items)
    for remaining in range(workers, 0, -1):
        sizes.append(left // remaining)
        left -= sizes[-1]
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for index, item in enumerate(front):
        shares[index % workers].append(item)
    ordered: list[pytest.Item] = []
    for share, size in zip(shares, sizes, strict=True):
        take = max(size - len(share), 0)
        ordered += share + rest[:take]
        del rest[:take]
    items[:] = ordered + rest


def pytest_collection_finish(session: pytest.Session) -> None:
    """Move what collection left alive (every module of the suite, 230,000 objects) out of
    the garbage collector's sight (`gc.freeze`): each full collection then walks only what the
    tests made since. The Qt tests collect after every test (tests/ui/conftest.py), 0.15 s of
    CPU each in a worker holding the whole suite before."""
    gc.collect()
    gc.freeze()


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


@pytest.fixture(autouse=True, scope="session")
def one_default_ssl_context() -> Iterator[None]:
    """Every httpx client in this process that verifies with the default trust store shares
    one SSL context, as httpx's docs advise: each built its own, loading the whole CA bundle
    (30 ms of CPU) for every client the tests and the in-process app open, thousands of them.
    Clients given their own context or bundle still get theirs."""
    build = httpx_transports.create_ssl_context
    shared: dict[tuple[str | None, str | None], ssl.SSLContext] = {}

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if verify is not True or cert is not None or not trust_env:
            return build(verify=verify, cert=cert, trust_env=trust_env)
        where = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if where not in shared:
            shared[where] = build(verify=True, cert=None, trust_env=True)
        return shared[where]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(httpx_transports, "create_ssl_context", create_ssl_context)
        yield


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
