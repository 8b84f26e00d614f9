"""The device's disk fills while it records acknowledgements and while it applies a pull.

The device (`tests.chaos.device_runner`: the real store and sync engine) keeps its data dir on a
small tmpfs, so a full disk is a real ENOSPC. The proxy fills that disk at the worst moment:
as a mutation request passes (the server applies it, the device cannot record the ack) or as
the changes feed is asked for (the page arrives, the device cannot store it). Each time the
engine must say why (`the device storage is full`) in its log, keep running, lose nothing, and
finish the work once the space returns; the server must hold every edit exactly once, with the
values the device wrote.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.store.store import Store
from tests.chaos.audit import Audit, audit, check_values, read_device, read_server
from tests.chaos.helpers import Device, add_device, fill_disk, record_figures, run_cli, small_disk
from tests.chaos.plans import PASS, Fault, RequestInfo
from tests.chaos.proxy import FaultProxy
from tests.support.serve import ServerProcess

DISK_BYTES = 4 << 20
#: The phone's lease in the acks run: the test waits past it, so it is short.
LEASE_S = 2.0
FULL_WORDS = "the device storage is full"


class FillDiskOn:
    """A proxy plan that fills `disk` when the first request under `prefix` passes by."""

    def __init__(self, disk: Path, prefix: str) -> None:
        self.disk = disk
        self.prefix = prefix
        self.filler: Path | None = None
        self.filled = threading.Event()

    def __call__(self, info: RequestInfo) -> Fault:
        if self.filler is None and info.path.startswith(self.prefix):
            self.filler = fill_disk(self.disk)
            self.filled.set()
        return PASS

    def free(self) -> None:
        assert self.filler is not None
        self.filler.unlink()


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    try:
        with small_disk(tmp_path / "disk", DISK_BYTES) as mounted:
            yield mounted
    except PermissionError as exc:
        pytest.skip(f"needs a small filesystem to fill: {exc}")


@pytest.fixture
def runners() -> Iterator[list[Device]]:
    """Devices to SIGKILL when the test ends, passed or not (their disk is unmounted next)."""
    started: list[Device] = []
    yield started
    for device in started:
        device.kill()


def wait_until(condition: object, timeout: float, what: str, device: Device) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if not device.running():
            pytest.fail(f"{device.name} exited while waiting for {what}:\n{device.output()}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout} s:\n{device.output()}")
        time.sleep(0.1)


def server_keys(db_url: str, device: str) -> int:
    conn = sqlite3.connect(f"file:{db_url.removeprefix('sqlite:///')}?mode=ro", uri=True)
    try:
        row = conn.execute(
            "SELECT COUNT(*) FROM idempotency_key AS k JOIN device AS d ON d.id = k.device_id "
            "WHERE d.name = ? AND k.state = 'done'",
            (device,),
        ).fetchone()
    finally:
        conn.close()
    return int(row[0])


def done_jobs(data_dir: Path) -> int:
    conn = sqlite3.connect(f"file:{data_dir / 'fieldsync.sqlite3'}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM jobs WHERE status = 'done'").fetchone()[0])
    finally:
        conn.close()


def check_everything(server: ServerProcess, devices: list[Device]) -> Audit:
    states = []
    for device in devices:
        state = read_device(device.name, device.data_dir)
        state.setup_jobs = device.setup_jobs
        states.append(state)
    server_state = read_server(Path(server.db_url.removeprefix("sqlite:///")))
    result = audit(server_state, states)
    check_values(server_state, states, result)
    assert result.ok, result.problems()
    assert result.dead == 0
    assert result.intended == sum(d.setup_jobs for d in devices)
    return result


def make_edits(data_dir: Path, tag: str, creates: int, updates: int) -> int:
    """Creates and updates, every value a marker unique to its edit; returns the job count."""
    with Store(data_dir) as store:
        ids = [
            store.record_edit("create", None, {"title": f"{tag} {i}", "notes": f"{tag}-n{i}"})
            for i in range(creates)
        ]
        for index in range(updates):
            entity = ids[index % len(ids)].entity_id
            store.record_edit("update", entity, {"site": f"{tag}-site-{index}"})
    return creates + updates


@pytest.mark.slow
def test_disk_full_while_recording_acks_loses_nothing_and_resumes(
    tmp_path: Path,
    server_process: ServerProcess,
    proxy: FaultProxy,
    disk: Path,
    runners: list[Device],
) -> None:
    token = add_device(server_process.db_url, "phone")
    phone = Device("phone", disk, token, [], seed=1, log_path=tmp_path / "phone.out")
    runners.append(phone)
    phone.setup_jobs = make_edits(phone.data_dir, "ack", creates=12, updates=8)
    plan = FillDiskOn(disk, "/v1/mutations")
    proxy.set_plan(plan)
    phone.start(
        proxy.base_url, 0.0, "--final", "--batch-size", "5", "--lease-seconds", str(LEASE_S)
    )

    wait_until(lambda: FULL_WORDS in phone.output(), 30, "word of the full disk", phone)
    assert plan.filled.is_set()
    # The server applied at least one batch whose acknowledgement the device could not write.
    applied = server_keys(server_process.db_url, "phone")
    assert applied >= 1
    assert done_jobs(phone.data_dir) == 0
    # Past the lease: the engine keeps going on a full disk, and says why.
    time.sleep(LEASE_S + 2.0)
    assert phone.running(), phone.output()
    assert done_jobs(phone.data_dir) == 0

    plan.free()
    freed = time.monotonic()
    assert phone.wait(90) == 0, phone.output()
    resumed_s = time.monotonic() - freed
    assert server_keys(server_process.db_url, "phone") == phone.setup_jobs
    result = check_everything(server_process, [phone])
    # The batches acknowledged on the wire but not on the disk were sent again and replayed.
    state = read_device("phone", phone.data_dir)
    record_figures("disk_full_acks", {
        "edits": phone.setup_jobs, "applied_while_disk_full": applied,
        "replays_detected_by_server": result.replays_detected, "lost": len(result.lost),
        "duplicated": len(result.duplicated), "wrong_values": len(result.wrong_values),
        "dead": result.dead, "done_after_space_returned_s": round(resumed_s, 1),
    })  # fmt: skip
    assert state.counters.get("duplicates_detected", 0) >= applied, state.counters


@pytest.mark.slow
def test_disk_full_while_applying_a_pull_loses_nothing_and_resumes(
    tmp_path: Path,
    server_process: ServerProcess,
    proxy: FaultProxy,
    disk: Path,
    runners: list[Device],
) -> None:
    office = Device("office", tmp_path, add_device(server_process.db_url, "office"), [], 2)
    phone = Device("phone", disk, add_device(server_process.db_url, "phone"), [], 3,
                   log_path=tmp_path / "phone.out")  # fmt: skip
    runners.append(phone)
    office.setup_jobs = make_edits(office.data_dir, "pull", creates=150, updates=20)
    done = run_cli(office.data_dir, "sync", "--until-idle", "--timeout", "60",
                   server=server_process.base_url, token=office.token)  # fmt: skip
    assert done.returncode == 0, done.stderr
    phone.setup_jobs = make_edits(phone.data_dir, "mine", creates=2, updates=1)
    plan = FillDiskOn(disk, "/v1/changes")
    proxy.set_plan(plan)
    phone.start(proxy.base_url, 0.0, "--final")

    wait_until(lambda: FULL_WORDS in phone.output(), 30, "word of the full disk", phone)
    time.sleep(3.0)
    assert phone.running(), phone.output()
    with sqlite3.connect(f"file:{phone.data_dir / 'fieldsync.sqlite3'}?mode=ro", uri=True) as db:
        pulled = db.execute("SELECT COUNT(*) FROM work_orders WHERE title LIKE 'pull %'")
        assert pulled.fetchone()[0] == 0  # the page that met the full disk: not half-applied

    plan.free()
    freed = time.monotonic()
    assert phone.wait(90) == 0, phone.output()
    resumed_s = time.monotonic() - freed
    with sqlite3.connect(f"file:{phone.data_dir / 'fieldsync.sqlite3'}?mode=ro", uri=True) as db:
        pulled = db.execute("SELECT COUNT(*) FROM work_orders WHERE title LIKE 'pull %'")
        assert pulled.fetchone()[0] == 150
    done = run_cli(office.data_dir, "sync", "--until-idle", "--timeout", "60",
                   server=server_process.base_url, token=office.token)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = check_everything(server_process, [office, phone])
    record_figures("disk_full_pull", {
        "records_pulled": 150, "lost": len(result.lost), "duplicated": len(result.duplicated),
        "wrong_values": len(result.wrong_values), "diverged_cache_records": len(result.diverged),
        "dead": result.dead, "done_after_space_returned_s": round(resumed_s, 1),
    })  # fmt: skip
