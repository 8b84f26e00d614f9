"""SIGKILL `fieldsync worker` mid-send, again and again; after a restart and a final
`fieldsync sync --until-idle` the server holds every edit exactly once."""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import IO

import pytest

from app.store.queue import QueueConfig
from app.store.store import Store
from tests.e2e.conftest import cli_env, fieldsync_command, run_cli
from tests.support.api import ServerApi
from tests.support.serve import ServerProcess

SEED = 20240501
ROUNDS = 4


def start_worker(data_dir: Path, url: str, token: str, log: IO[str]) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [*fieldsync_command(), "--data-dir", str(data_dir), "--server", url, "worker",
         "--batch-size", "1"],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=cli_env(token),
    )  # fmt: skip
    assert process.stdout is not None
    deadline = time.monotonic() + 30
    line = process.stdout.readline()
    while "delivering" not in line:
        assert time.monotonic() < deadline, "worker did not start"
        assert process.poll() is None, "worker exited before delivering"
        line = process.stdout.readline()
    return process


def leased_jobs(data_dir: Path) -> int:
    with sqlite3.connect(data_dir / "fieldsync.sqlite3", timeout=10) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM jobs WHERE status = 'leased'").fetchone()[0])


def wait_for_a_lease(data_dir: Path, within_s: float = 2.0) -> None:
    deadline = time.monotonic() + within_s
    while leased_jobs(data_dir) == 0 and time.monotonic() < deadline:
        time.sleep(0.002)


@pytest.mark.slow
def test_sigkill_mid_send_then_restart_delivers_every_edit_once(
    tmp_path: Path, server_process: ServerProcess, server_db: str, device_token: str
) -> None:
    rng = random.Random(SEED)
    data_dir = tmp_path / "device"
    log_path = tmp_path / "worker.log"
    url = server_process.base_url
    updates: dict[str, list[str]] = {}
    jobs_total = 0
    killed_with_leases = 0

    for round_no in range(ROUNDS):
        with Store(data_dir, queue_config=QueueConfig()) as store:
            # Enough to keep one-at-a-time sends going past the kill (a burst of the device's
            # own rate limit goes out at once).
            for n in range(80):
                entity = store.record_edit("create", None, {"title": f"R{round_no} WO {n}"})
                updates[entity.entity_id] = []
                jobs_total += 1
            for entity_id in rng.sample(sorted(updates), 40):
                if store.cache.get(entity_id)["deleted"]:
                    continue
                notes = f"round {round_no} note {rng.randrange(10**6)}"
                store.record_edit("update", entity_id, {"notes": notes})
                updates[entity_id].append(notes)
                jobs_total += 1
        with log_path.open("a") as log:
            worker = start_worker(data_dir, url, device_token, log)
            time.sleep(rng.uniform(0.02, 0.3))
            wait_for_a_lease(data_dir)  # then kill: a request is (almost surely) in flight
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=10)
            assert worker.stdout is not None
            worker.stdout.close()
        assert worker.returncode == -signal.SIGKILL
        killed_with_leases += leased_jobs(data_dir) > 0

    result = run_cli(data_dir, "--server", url, "sync", "--until-idle", "--timeout", "60",
                     token=device_token)  # fmt: skip
    assert result.returncode == 0, result.stderr + log_path.read_text()[-3000:]

    # At least one kill interrupted a send (the lease was still held when the process died).
    assert killed_with_leases >= 2
    api = ServerApi(url, device_token)
    try:
        records = api.all_changes(limit=1000)
    finally:
        api.close()
    by_id = {r["id"]: r for r in records}
    assert len(records) == len(by_id) == len(updates)  # every work order exactly once
    assert set(by_id) == set(updates)
    for entity_id, notes in updates.items():
        record = by_id[entity_id]
        assert record["version"] == 1 + len(notes), (entity_id, record, notes)  # each update once
        assert record["notes"] == (notes[-1] if notes else "")
    with sqlite3.connect(server_db.removeprefix("sqlite:///")) as conn:
        keys = conn.execute("SELECT COUNT(*) FROM idempotency_key").fetchone()[0]
    assert keys == jobs_total  # every job reached the server under its one key
    with Store(data_dir) as store:
        depth = store.stats()["queue_depth"]
    assert depth["done"] == jobs_total
    assert depth["pending"] == depth["leased"] == 0
