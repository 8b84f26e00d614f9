"""Fixtures of the attachment tests: a store on a temp dir with a clock moved by hand, the
real server on loopback and a second device."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.attachments import AttachmentConfig, Attachments
from app.store.store import Store
from server.embedded import EmbeddedServer, start_server
from tests.sync.fake_clock import FakeClock
from tests.sync.sync_support import make_store


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[Store]:
    with Store(
        tmp_path / "device", synchronous="NORMAL", clock=clock.time, rng=random.Random(3)
    ) as opened:
        yield opened


@pytest.fixture
def server(server_sqlite: str) -> Iterator[EmbeddedServer]:
    """The real server on loopback, on SQLite in the temp dir."""
    with start_server(server_sqlite, rate_limit_per_second=0) as up:
        yield up


@pytest.fixture
def phone_b(tmp_path: Path) -> Iterator[Store]:
    """A second device (a colleague's phone, or the office's)."""
    with make_store(tmp_path / "device-b") as opened:
        yield opened


@pytest.fixture
def config() -> AttachmentConfig:
    return AttachmentConfig()


@pytest.fixture
def attachments(store: Store, config: AttachmentConfig) -> Attachments:
    return Attachments(store, config)


@pytest.fixture
def work_order(store: Store) -> str:
    return store.record_edit("create", None, {"title": "Replace gasket"}).entity_id


@pytest.fixture
def acked(store: Store) -> str:
    """A work order whose create the server acknowledged."""
    entity = store.record_edit("create", None, {"title": "Replace gasket"}).entity_id
    (create,) = store.queue.claim("pipeline", 1)
    store.queue.ack(create, result_version=1)
    return entity


def photo(tmp_path: Path, name: str = "meter.jpg", size: int = 300_000, seed: int = 1) -> Path:
    """A file of ``size`` reproducible bytes."""
    path = tmp_path / name
    path.write_bytes(random.Random(seed).randbytes(size))
    return path
