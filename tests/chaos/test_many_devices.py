"""Many devices, shared work orders, a faulty flapping link and SIGKILLs: nothing lost or doubled.

M device processes (`tests/chaos/device_runner.py`: the real store and sync engine, one data
dir and token each) make N edits each, some to the same work orders, through the fault proxy
at a high fault rate while the link flaps; devices are SIGKILLed at random moments and started
again. When every device is idle, each runs a clean `fieldsync sync --until-idle` straight to
the server, and the invariant checker (`audit.py`) compares the server's database with every
device's jobs table and cache, and every field on the server with the value the last
acknowledged edit of it wrote. Every fault injected is transient, so no edit may end dead; the
run must have lost acknowledgements on `/v1/mutations…` that the server then replayed, and at
least half the planned kills must have hit a running device, or it proves nothing. Seeded:
the seed is printed with the replay command.
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import pytest

from app.records import EDITABLE_FIELDS
from tests.chaos.conftest import LARGE, SCALE
from tests.chaos.fleet import (
    MUTATIONS,
    audit_figures,
    audit_fleet,
    create_shared,
    drive,
    fault_figures,
    make_plan,
    settle,
)
from tests.chaos.helpers import Device, add_device, record_figures
from tests.chaos.plans import ForcedFaults, RandomPlan, drop_response
from tests.chaos.proxy import FaultProxy
from tests.support.serve import ServerProcess

#: Mutation requests (counted from 0) whose answer is dropped whatever the seed draws.
FORCED_LOST_ACKS = (2, 7, 15)


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
    shared = create_shared(server_process.base_url, devices, rng)
    for device in devices:
        plan = make_plan(rng, device.name, SCALE.edits, shared)
        device.plan_path.write_text(json.dumps(plan))

    # Only transient faults: each of them must end in a retry, never in a dead edit.
    random_plan = RandomPlan(chaos_seed, SCALE.fault_rate)
    proxy.set_plan(ForcedFaults(random_plan, MUTATIONS, FORCED_LOST_ACKS, drop_response()))
    pace = 0.5
    window = SCALE.edits * pace / 2 + 2.0
    flaps = int(window / 3.8 + 1)
    proxy.flap([(3.0, 0.8)] * flaps)
    planned = SCALE.kills * len(devices)
    kills = sorted((rng.uniform(0.5, window), rng.randrange(len(devices))) for _ in range(planned))
    killed = 0

    def tick(elapsed: float) -> bool:
        nonlocal killed
        while kills and kills[0][0] <= elapsed:
            _, which = kills.pop(0)
            if devices[which].kill():
                killed += 1
                devices[which].start(proxy.base_url, pace)
        return bool(kills)

    quiesced = drive(devices, proxy.base_url, pace, 540 if LARGE else 150, tick)
    proxy.wait_flapping(30)
    settled = time.monotonic()
    settle(server_process.base_url, devices)
    settle_s = time.monotonic() - settled
    result, in_use = audit_fleet(server_process.db_url, devices)
    records = proxy.snapshot()
    figures = {
        "seed": chaos_seed,
        "devices": len(devices),
        "edits_per_device": SCALE.edits,
        "fault_rate": SCALE.fault_rate,
        **fault_figures(records),
        "forced_lost_acks": len(FORCED_LOST_ACKS),
        "link_flaps": flaps,
        "kills_planned": planned,
        "kills": killed,
        **audit_figures(result, in_use),
        "time_to_quiesce_s": round(quiesced, 1),
        "time_with_final_sync_s": round(quiesced + settle_s, 1),
    }
    record_figures("many_devices", figures)
    assert result.ok, f"seed {chaos_seed}:\n{result.problems()}"
    assert result.dead == 0, f"seed {chaos_seed}: a transient fault killed an edit"
    assert in_use == 0
    # Not vacuous: every field of every record was compared with the edit that set it...
    assert result.server_records > len(shared)
    assert result.values_checked == len(EDITABLE_FIELDS) * result.server_records
    # ...acknowledgements were lost after the server applied them, and retries replayed...
    assert figures["lost_acks_on_mutations"] >= 1, figures
    assert result.replays_detected >= 1, figures
    # ...and the devices were killed while they worked, not after.
    assert killed >= math.ceil(planned / 2), figures
