"""The contract between the real engine and the bridge: what the view-models' fakes publish.

Tests of screens publish job events by hand; this one records what the real engine makes the
bridge emit (a server that is not there, then the real server on loopback), so that a fake
that drifts from it (a "pending" job with an error, which the engine never sends) is caught.
"""

from __future__ import annotations

import math
from typing import Any

from app.states import RETRYING, JobStatus
from server.embedded import EmbeddedServer
from tests.sync.sync_support import closed_port_url
from tests.ui.conftest import Device, Runner
from ui.qt import connect
from ui.services import Services

#: Every state the engine publishes for a job, as the bridge carries it.
PUBLISHED = {str(state) for state in (*JobStatus, RETRYING)}


def test_the_real_engine_drives_the_bridge_as_the_fakes_do(
    run: Runner, services: Services, server: EmbeddedServer, device: Device
) -> None:
    bridge = services.bridge
    batches: list[list[dict[str, Any]]] = []
    singles: list[tuple[int, str, str, str, float]] = []
    ops: list[dict[str, Any]] = []
    connect(bridge.jobStatesChanged, batches.append)
    connect(bridge.jobStateChanged, lambda *args: singles.append(args))
    connect(bridge.opChanges, ops.append)

    device.connect(closed_port_url(), server.add_device("phone-1"))
    device.start()
    result = run(services.operations.save_edit("create", None, {"title": "Inspect boiler"}))
    entity_id = result.entity_id

    def states() -> list[dict[str, Any]]:
        return [change for batch in batches for change in batch]

    # No server: leased, then retrying with the reason and when it goes next.
    run.until(lambda: any(change["status"] == RETRYING for change in states()), timeout=10)
    leased, retrying = states()[:2]
    assert leased == {
        "job_id": retrying["job_id"],
        "entity_id": entity_id,
        "status": "leased",
        "error": "",
        "next_attempt_at": leased["next_attempt_at"],
    }
    assert math.isnan(leased["next_attempt_at"])
    assert retrying["entity_id"] == entity_id
    assert "cannot reach the server" in retrying["error"]
    assert retrying["next_attempt_at"] > 0

    # The real server: leased again, then done, and the record's badge follows.
    device.stop()
    online = device.connect(server.base_url)
    device.start()
    online.set_os_hint(True)
    run.until(lambda: states()[-1]["status"] == JobStatus.DONE, timeout=15)
    done = states()[-1]
    assert (done["entity_id"], done["error"], math.isnan(done["next_attempt_at"])) == (
        entity_id,
        "",
        True,
    )

    # Every change the engine published is one the bridge and the fakes know, and a pending
    # job never carries an error: a failed one is "retrying".
    assert {change["status"] for change in states()} <= PUBLISHED
    assert not [c for c in states() if c["status"] == JobStatus.PENDING and c["error"]]
    # Each change of a batch is also its own jobStateChanged, in the same order.
    assert [(c["job_id"], c["status"], c["error"]) for c in states()] == [
        (job_id, status, error) for job_id, _, status, error, _ in singles
    ]
    # The save's OpChanges reached the screens whole: its work order, the queue flag.
    assert (ops[0]["entity_ids"], ops[0]["queue"], ops[0]["attachments"]) == (
        [entity_id],
        True,
        False,
    )
