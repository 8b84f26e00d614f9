"""A fleet of chaos devices: seeded edit plans with unique markers, shared records, the audit.

Shared by the many-devices run (faulty link, devices SIGKILLed) and the server-kill run (the
server SIGKILLed): both plan edits here, settle with clean syncs and audit the same way.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.store.store import Store
from tests.chaos.audit import Audit, audit, check_values, read_device, read_server
from tests.chaos.helpers import Device, run_cli
from tests.chaos.plans import RequestRecord

SHARED = 3
MUTATIONS = "/v1/mutations"
TEXT_FIELDS = ("title", "notes", "site", "assignee")


def random_uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def make_plan(rng: random.Random, name: str, edits: int, shared: list[str]) -> list[dict[str, Any]]:
    """Creates, edits of own and shared work orders, deletes; every value unique to its edit
    (`<field> <device>-<index>`), so the audit can tell which edit a value on the server
    came from."""
    plan: list[dict[str, Any]] = []
    own: list[str] = []
    for index in range(edits):
        marker = f"{name}-{index}"
        roll = rng.random()
        field = rng.choice(TEXT_FIELDS)
        if roll < 0.25 or (not own and roll < 0.5):
            entity = random_uuid(rng)
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


def create_shared(server_url: str, devices: list[Device], rng: random.Random) -> list[str]:
    """Device 0 creates the shared work orders; every device pulls them (no faults)."""
    shared = []
    with Store(devices[0].data_dir) as store:
        for index in range(SHARED):
            result = store.record_edit("create", random_uuid(rng), {"title": f"Shared {index}"})
            shared.append(result.entity_id)
    devices[0].setup_jobs = SHARED
    settle(server_url, devices, rounds=1)
    return shared


def settle(server_url: str, devices: list[Device], rounds: int = 2) -> None:
    """`fieldsync sync --until-idle` for every device straight to the server; the second
    round only pulls what the others sent in the first."""
    for _ in range(rounds):
        for device in devices:
            done = run_cli(device.data_dir, "sync", "--until-idle", "--timeout", "60",
                           server=server_url, token=device.token)  # fmt: skip
            assert done.returncode == 0, f"{device.name}: {done.stdout}{done.stderr}"


def audit_fleet(db_url: str, devices: list[Device]) -> tuple[Audit, int]:
    """The invariant checker and the value check over every device; also returns how many
    idempotency keys the server still holds as in use (`processing`)."""
    states = []
    for device in devices:
        state = read_device(device.name, device.data_dir)
        state.setup_jobs = device.setup_jobs
        states.append(state)
    target = db_url if db_url.startswith("postgresql") else Path(db_url.removeprefix("sqlite:///"))
    server = read_server(target)
    result = audit(server, states)
    check_values(server, states, result)
    return result, len(server.in_use)


def drive(
    devices: list[Device],
    server_url: str,
    pace: float,
    timeout: float,
    tick: Callable[[float], bool] = lambda elapsed: False,
) -> float:
    """Start every device against `server_url`; every 50 ms call `tick(elapsed)` (it kills
    and restarts things, and answers whether it has more to do) until it is done and every
    device has exited 0. Returns the seconds that took; a device that fails fails the test."""
    started = time.monotonic()
    for device in devices:
        device.start(server_url, pace)
    try:
        while True:
            busy = tick(time.monotonic() - started)
            for device in devices:
                code = device.process.poll() if device.process else None
                assert code in (None, 0), f"{device.name} exited {code}:\n{device.output()}"
            if not busy and not any(device.running() for device in devices):
                return time.monotonic() - started
            assert time.monotonic() - started < timeout, "devices did not go idle: " + "; ".join(
                f"{d.name}: {d.output()[-400:]}" for d in devices
            )
            time.sleep(0.05)
    finally:
        for device in devices:
            device.kill()


def lost_acknowledgements(records: list[RequestRecord]) -> int:
    """Mutation requests the server answered 200/201 whose answer the proxy then dropped."""
    return sum(
        1
        for r in records
        if r.path.startswith(MUTATIONS) and r.fault == "drop_response"
        and r.upstream_status in (200, 201)
    )  # fmt: skip


def fault_figures(records: list[RequestRecord]) -> dict[str, Any]:
    """What the proxy did, overall and to `/v1/mutations…` alone (a delay on `/healthz` is
    a fault, but not one the delivery path had to survive)."""
    on_mutations = [r for r in records if r.path.startswith(MUTATIONS)]
    return {
        "requests_through_proxy": len(records),
        "faults_injected": sum(1 for r in records if r.fault != "pass"),
        "requests_on_mutations": len(on_mutations),
        "faults_on_mutations": sum(1 for r in on_mutations if r.fault != "pass"),
        "lost_acks_on_mutations": lost_acknowledgements(records),
        "fault_mix": dict(sorted(Counter(r.fault for r in records).items())),
        "fault_mix_on_mutations": dict(sorted(Counter(r.fault for r in on_mutations).items())),
    }


def audit_figures(result: Audit, in_use: int) -> dict[str, Any]:
    return {
        "intended_mutations": result.intended,
        "applied_effects": result.applied,
        "lost": len(result.lost),
        "duplicated": len(result.duplicated),
        "stranded": len(result.stranded),
        "wrong_values": len(result.wrong_values),
        "values_checked": result.values_checked,
        "diverged_cache_records": len(result.diverged),
        "conflicts_captured": result.conflicts,
        "dead": result.dead,
        "held_behind_conflict": result.held_behind_conflict,
        "already_applied_409": result.already_applied,
        "replays_detected_by_server": result.replays_detected,
        "keys_left_in_use": in_use,
    }
