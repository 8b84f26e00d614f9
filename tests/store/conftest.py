"""Fixtures for the local store tests: a store on a temp dir with an injected clock."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_support import FakeClock

from app.store.queue import QueueConfig
from app.store.store import Store


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "device"


@pytest.fixture
def queue_config() -> QueueConfig:
    return QueueConfig()


@pytest.fixture
def store(data_dir: Path, clock: FakeClock, queue_config: QueueConfig) -> Iterator[Store]:
    with Store(data_dir, queue_config=queue_config, clock=clock, rng=random.Random(1234)) as opened:
        yield opened
