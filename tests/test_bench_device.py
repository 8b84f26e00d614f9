"""The benchmarks' timed sync pulls what the server holds and times it from the engine's own
events (nothing is timed here: the figures only have to be consistent)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from app.store.store import Store
from server.embedded import start_server
from tests.support.api import ServerApi
from tests.sync.sync_support import closed_port_url

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from bench_device import engine_config, timed_sync  # noqa: E402


async def test_a_timed_sync_brings_every_change_and_its_pull_lies_inside_it(
    tmp_path: Path,
) -> None:
    with start_server(f"sqlite:///{tmp_path / 'server.sqlite3'}") as server:
        office = ServerApi(server.base_url, server.add_device("office", "admin"))
        try:
            for index in range(3):
                office.create(title=f"Work order {index}")
        finally:
            office.close()
        reader = server.add_device("reader", "admin")
        with Store(tmp_path / "device") as store:
            timed = await timed_sync(store, engine_config(server.base_url), reader, 60.0)
            cached = store.db.execute_sql("SELECT COUNT(*) FROM work_orders").fetchone()[0]
    assert (timed.received, cached) == (3, 3)
    assert 0 < timed.pull_s <= timed.total_s


async def test_a_sync_that_never_pulls_is_an_error_not_a_figure(tmp_path: Path) -> None:
    with Store(tmp_path / "device") as store, pytest.raises(RuntimeError, match="did not pull"):
        await timed_sync(store, engine_config(closed_port_url()), "token", 2.0)
