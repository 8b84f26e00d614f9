"""Many devices, shared work orders, a faulty flapping link and SIGKILLs: nothing lost or doubled.

M device processes (`tests/chaos/device_runner.py`: the real store and sync engine, one data
dir and token each) make N edits each, some to the same work orders, through the fault proxy
at a high fault rate while the link flaps; devices are SIGKILLed at random moments and started
again. When every device is idle, each runs a clean `fieldsync sync --until-idle` straight to
the server, and the invariant checker (`audit.py`) compares the server's database with every
device's jobs table and cache. Seeded: the seed is printed with the replay command.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.store.store import Store
from tests.chaos.audit import audit, read_device, read_server
from tests.chaos.conftest import LARGE, SCALE
from tests.chaos.helpers import Device, add_device, record_figures, run_cli
from tests.chaos.proxy import FaultProxy, RandomPlan
from tests.support.serve import ServerProcess

SHARED = 3
TEXT_FIELDS = ("title", "notes", "site", "assignee")


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def make_plan(rng: random.Random, name: str, edits: int, shared: list[str]) -> list[dict[str, Any]]:
    """Creates, edits of own and shared work orders, deletes; every value unique to its edit."""
    plan: list[dict[str, Any]] = []
    own: list[str] = []
    for index in range(edits):
        marker = f"{name}-{index}"
        roll = rng.random()
        field = rng.choice(TEXT_FIELDS)
        if roll < 0.25 or (not own and roll < 0.5):
            entity = _uuid(rng)
            own.append(entity)
            plan.append({"op": "create", "id": entity,
                         "fields": {"title": f"WO {marker}", "notes": marker}})  # fmt: skip
        elif roll < 0.65:
            plan.append({"op": "update", "id": rng.choice(shared),
                         "fields": {field: f"{field} {marker}"}})  # fmt: skip
        elif roll < 0.9 and own:
            plan.append({"op": "update", "id": rng.choice(own),
                         "fields": {field: f"{field} {marker}"}})  # fmt: skip
        elif roll < 0.97 and own:
            plan.append({"op": "delete", "id": own.pop(rng.randrange(len(own)))})
        else:
            plan.append({"op": "delete", "id": rng.choice(shared)})
    return plan


def _setup(server: ServerProcess, devices: list[Device], rng: random.Random) -> list[str]:
    """Device 0 creates the shared work orders; every device pulls them (no faults)."""
    shared = []
    with Store(devices[0].data_dir) as store:
        for index in range(SHARED):
            result = store.record_edit("create", _uuid(rng), {"title": f"Shared {index}"})
            shared.append(result.entity_id)
    devices[0].setup_jobs = SHARED
    for device in devices:
        done = run_cli(device.data_dir, "sync", "--until-idle", "--timeout", "60",
                       server=server.base_url, token=device.token)  # fmt: skip
        assert done.returncode == 0, done.stderr
    return shared


@pytest.mark.slow
def test_many_devices_lose_nothing_and_apply_nothing_twice(
    tmp_path: Path, server_process: ServerProcess, proxy: FaultProxy, chaos_seed: int
) -> None:
    rng = random.Random(chaos_seed)
    names = [f"device-{i}" for i in range(SCALE.devices)]
    tokens = {name: add_device(server_process.db_url, name) for name in names}
    devices = [
        Device(name, tmp_path / "devices", tokens[name], [], chaos_seed + i)
        for i, name in enumerate(names)
    ]
    shared = _setup(server_process, devices, rng)
    for device in devices:
        plan = make_plan(rng, device.name, SCALE.edits, shared)
        device.plan_path.write_text(json.dumps(plan))

    plan = RandomPlan(chaos_seed, SCALE.fault_rate)
    proxy.set_plan(plan)
    pace = 0.5
    window = SCALE.edits * pace / 2 + 2.0
    proxy.flap([(3.0, 0.8)] * int(window / 3.8 + 1))
    kills = sorted(
        (rng.uniform(0.5, window), rng.randrange(len(devices)))
        for _ in range(SCALE.kills * len(devices))
    )
    started = time.monotonic()
    for device in devices:
        device.start(proxy.base_url, pace)
    killed = 0
    deadline = started + (540 if LARGE else 150)
    try:
        while True:
            elapsed = time.monotonic() - started
            while kills and kills[0][0] <= elapsed:
                _, which = kills.pop(0)
                if devices[which].kill():
                    killed += 1
                    devices[which].start(proxy.base_url, pace)
            for device in devices:
                code = device.process.poll() if device.process else None
                assert code in (None, 0), f"{device.name} exited {code}:\n{device.output()}"
            if not kills and all(d.process and d.process.poll() == 0 for d in devices):
                break
            assert time.monotonic() < deadline, "devices did not go idle in time: " + "; ".join(
                f"{d.name}: {d.output()[-400:]}" for d in devices
            )
            time.sleep(0.05)
    finally:
        for device in devices:
            device.kill()
    quiesced = time.monotonic() - started
    proxy.wait_flapping(30)

    # A clean `fieldsync sync --until-idle` straight to the server (no proxy), then a second
    # round that only pulls what the others sent in the first.
    for _ in range(2):
        for device in devices:
            done = run_cli(device.data_dir, "sync", "--until-idle", "--timeout", "60",
                           server=server_process.base_url, token=device.token)  # fmt: skip
            assert done.returncode == 0, f"{device.name}: {done.stderr}"
    total = time.monotonic() - started

    server_db = Path(server_process.db_url.removeprefix("sqlite:///"))
    states = []
    for device in devices:
        state = read_device(device.name, device.data_dir)
        state.setup_jobs = device.setup_jobs
        states.append(state)
    result = audit(read_server(server_db), states)
    records = proxy.snapshot()
    faulty = sum(1 for r in records if r.fault != "pass")
    figures = {
        "seed": chaos_seed,
        "devices": len(devices),
        "edits_per_device": SCALE.edits,
        "fault_rate": SCALE.fault_rate,
        "requests_through_proxy": len(records),
        "faults_injected": faulty,
        "fault_mix": dict(sorted(plan.counts.items())),
        "link_flaps": int(window / 3.8 + 1),
        "kills": killed,
        "intended_mutations": result.intended,
        "applied_effects": result.applied,
        "lost": len(result.lost),
        "duplicated": len(result.duplicated),
        "stranded": len(result.stranded),
        "diverged_cache_records": len(result.diverged),
        "conflicts_captured": result.conflicts,
        "dead": result.dead,
        "held_behind_conflict": result.held_behind_conflict,
        "already_applied_409": result.already_applied,
        "replays_detected_by_server": result.replays_detected,
        "time_to_quiesce_s": round(quiesced, 1),
        "time_with_final_sync_s": round(total, 1),
    }
    record_figures("many_devices", figures)
    assert result.ok, f"seed {chaos_seed}:\n{result.problems()}"
    assert killed >= 1
    assert faulty > 0
