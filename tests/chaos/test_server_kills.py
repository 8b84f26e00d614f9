"""The server process SIGKILLed again and again while devices deliver: nothing lost or doubled.

A real `fieldsync-server serve` (SQLite, then PostgreSQL) behind the proxy, which passes every
request untouched: the only fault is the kill. Device processes (`device_runner.py`, the real
store and engine) make seeded edits with unique markers; at seeded moments the test waits for
a mutation to reach the server, lets it run for a random part of the time a mutation takes
there (reading it, claiming its key, the effect, the commit), SIGKILLs the server, starts a new
one on the same database and points the proxy at it. Afterwards every device settles with
clean syncs and the audit compares the database with every device, field by field; no
idempotency key may be left in use, and no edit may die of the restarts.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.records import EDITABLE_FIELDS
from server.db.idempotency import request_hash
from server.db.store import open_store
from server.records.mutations import validate_mutation
from tests.chaos.audit import read_device, read_server
from tests.chaos.conftest import LARGE, SCALE
from tests.chaos.fleet import (
    MUTATIONS,
    audit_figures,
    audit_fleet,
    create_shared,
    drive,
    make_plan,
    settle,
)
from tests.chaos.helpers import Device, add_device, record_figures
from tests.chaos.plans import PASS, Fault, RequestInfo
from tests.chaos.proxy import FaultProxy
from tests.chaos.restarts import Restarts
from tests.support.postgres import PostgresCluster
from tests.support.serve import ServerProcess

PACE = 0.4


class MutationSeen:
    """A pass-through plan that tells the test when a mutation is on its way to the server."""

    def __init__(self) -> None:
        self.seen = threading.Event()

    def __call__(self, info: RequestInfo) -> Fault:
        if info.path.startswith(MUTATIONS):
            self.seen.set()
        return PASS


def median(values: list[float], default: float) -> float:
    return sorted(values)[len(values) // 2] if values else default


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'server.sqlite3'}"
        return
    # The session's cluster (tests/conftest.py), a database of this test's own.
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    yield cluster.create_database(f"kills_{uuid.uuid4().hex[:12]}")


@pytest.mark.slow
def test_server_sigkilled_while_devices_deliver(
    tmp_path: Path, db_url: str, chaos_seed: int
) -> None:
    rng = random.Random(chaos_seed)
    seen = MutationSeen()
    proxy = FaultProxy(("127.0.0.1", 9), seen)
    servers = Restarts(db_url, proxy)
    proxy.set_upstream(servers.upstream())
    proxy.start()
    try:
        names = [f"device-{i}" for i in range(SCALE.kill_devices)]
        devices = [
            Device(name, tmp_path / "devices", add_device(db_url, name), [], chaos_seed + i)
            for i, name in enumerate(names)
        ]
        shared = create_shared(servers.current.base_url, devices, rng)
        for device in devices:
            plan = make_plan(rng, device.name, SCALE.kill_edits, shared)
            device.plan_path.write_text(json.dumps(plan))
        window = SCALE.kill_edits * PACE / 2
        schedule = sorted(rng.uniform(1.0, window) for _ in range(SCALE.server_kills))
        # Where in its request the mutation is killed: a fraction of the time this machine's
        # server takes for one (its own request log says), so the kills spread over reading,
        # claiming the key, the effect and the commit, whatever the load.
        into_request = [rng.random() for _ in schedule]
        mid_request = 0

        def tick(elapsed: float) -> bool:
            nonlocal mid_request
            if schedule and schedule[0] <= elapsed:
                schedule.pop(0)
                seen.seen.clear()
                # Kill while a mutation is being applied, if one comes within 3 s.
                if seen.seen.wait(3.0):
                    mid_request += 1
                    time.sleep(into_request.pop(0) * median(servers.mutation_ms(), 30.0) / 1000)
                servers.kill_and_restart()
            return bool(schedule)

        quiesced = drive(devices, proxy.base_url, PACE, 540 if LARGE else 240, tick)
        settled = time.monotonic()
        settle(servers.current.base_url, devices)
        settle_s = time.monotonic() - settled
        result, in_use = audit_fleet(db_url, devices)
    finally:
        proxy.stop()
        servers.stop()

    counters = [read_device(d.name, d.data_dir).counters for d in devices]
    takeovers = sum("idempotency claim taken over" in line for line in servers.log)
    abandoned = sum(
        int(json.loads(line).get("count", 0))
        for line in servers.log
        if "abandoned idempotency claims" in line
    )
    figures = {
        "seed": chaos_seed,
        "backend": db_url.split(":", 1)[0],
        "devices": len(devices),
        "edits_per_device": SCALE.kill_edits,
        "server_kills": servers.kills,
        "kills_during_a_mutation": mid_request,
        "restart_s_median": round(median(servers.downtime_s, 0.0), 2),
        "mutation_ms_median": round(median(servers.mutation_ms(), 0.0), 1),
        "in_use_answers": sum(c.get("retry_reason:key_in_use", 0) for c in counters),
        "claims_abandoned_at_restart": abandoned,
        "claims_taken_over": takeovers,
        **audit_figures(result, in_use),
        "time_to_quiesce_s": round(quiesced, 1),
        "time_with_final_sync_s": round(quiesced + settle_s, 1),
    }
    record_figures(f"server_kills_{figures['backend']}", figures)
    assert result.ok, f"seed {chaos_seed}:\n{result.problems()}"
    assert result.dead == 0, figures
    assert in_use == 0, figures
    assert servers.kills == SCALE.server_kills
    assert mid_request >= (SCALE.server_kills + 1) // 2, figures
    assert result.server_records > len(shared)
    assert result.values_checked == len(EDITABLE_FIELDS) * result.server_records


def test_a_claim_left_by_a_killed_server_is_taken_over_at_once_after_the_restart(
    tmp_path: Path,
) -> None:
    """What a server SIGKILLed between claiming a key and committing its effect leaves: a fresh
    `processing` row. The restarted server must not answer the retry "in use" for the lease."""
    db_url = f"sqlite:///{tmp_path / 'server.sqlite3'}"
    token = add_device(db_url, "phone")
    body = {"entity_id": str(uuid.uuid4()), "op": "create", "base_version": None,
            "fields": {"title": "claimed, then the server died"}}  # fmt: skip
    key = str(uuid.uuid4())
    store = open_store(db_url)
    try:
        device = store.tables.Device.get(store.tables.Device.name == "phone")
        now = time.time()
        store.tables.IdempotencyKey.insert(
            device_id=device.id, key=key, state="processing", claim_token="0" * 32,
            request_hash=request_hash("mutation", validate_mutation(body).canonical()),
            claimed_at=now, created_at=now,
        ).execute()  # fmt: skip
    finally:
        store.close()
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": key}
    with ServerProcess(db_url) as server:
        reply = httpx.post(f"{server.base_url}/v1/mutations", json=body, headers=headers)
        again = httpx.post(f"{server.base_url}/v1/mutations", json=body, headers=headers)
        lines = "".join(server.lines)
    assert reply.status_code == 201, reply.text
    assert reply.json()["record"]["title"] == "claimed, then the server died"
    assert again.status_code == 201
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert "abandoned idempotency claims" in lines
    state = read_server(Path(db_url.removeprefix("sqlite:///")))
    assert state.in_use == []
    assert len(state.records) == 1
