"""Fixtures of the attachment tests: a store on a temp dir with a clock moved by hand."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.attachments import AttachmentConfig, Attachments
from app.store.store import Store
from tests.sync.fake_clock import FakeClock


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
def config() -> AttachmentConfig:
    return AttachmentConfig()


@pytest.fixture
def attachments(store: Store, config: AttachmentConfig) -> Attachments:
    return Attachments(store, config)


@pytest.fixture
def work_order(store: Store) -> str:
    return store.record_edit("create", None, {"title": "Replace gasket"}).entity_id


def photo(tmp_path: Path, name: str = "meter.jpg", size: int = 300_000, seed: int = 1) -> Path:
    """A file of ``size`` reproducible bytes."""
    path = tmp_path / name
    path.write_bytes(random.Random(seed).randbytes(size))
    return path
