"""Chaos fixtures: scale and seed from the environment, a real server process, the proxy."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.chaos.helpers import LARGE
from tests.chaos.proxy import FaultProxy
from tests.support.serve import ServerProcess


@dataclass(frozen=True)
class Scale:
    devices: int
    edits: int
    kills: int
    fault_rate: float
    storm_devices: int
    fuzz_examples: int
    #: The server-kill run: devices × edits while the server is SIGKILLed `server_kills` times.
    server_kills: int
    kill_devices: int
    kill_edits: int


SCALE = (
    Scale(devices=8, edits=60, kills=4, fault_rate=0.4, storm_devices=120, fuzz_examples=60,
          server_kills=16, kill_devices=6, kill_edits=80)
    if LARGE
    else Scale(devices=4, edits=20, kills=2, fault_rate=0.35, storm_devices=40, fuzz_examples=12,
               server_kills=5, kill_devices=3, kill_edits=30)
)  # fmt: skip


@pytest.fixture(scope="session")
def chaos_seed() -> int:
    """`FIELDSYNC_CHAOS_SEED` or a fresh one; printed so a failure can be replayed."""
    given = os.environ.get("FIELDSYNC_CHAOS_SEED")
    seed = int(given) if given else random.SystemRandom().randrange(1, 2**31)
    print(f"\nchaos seed {seed}: replay with FIELDSYNC_CHAOS_SEED={seed}")
    return seed


@pytest.fixture
def server_process(tmp_path: Path) -> Iterator[ServerProcess]:
    """`fieldsync-server serve` on a temp SQLite database and a free loopback port."""
    db = tmp_path / "server" / "server.sqlite3"
    db.parent.mkdir()
    with ServerProcess(f"sqlite:///{db}") as server:
        yield server


@pytest.fixture
def proxy(server_process: ServerProcess) -> Iterator[FaultProxy]:
    parts = urlsplit(server_process.base_url)
    running = FaultProxy((parts.hostname or "127.0.0.1", parts.port or 80)).start()
    try:
        yield running
    finally:
        running.stop()
