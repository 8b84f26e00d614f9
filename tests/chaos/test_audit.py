"""The chaos audit itself: a value on the server that is not the last acknowledged edit's is
caught, so a chaos run that applies edits out of order or twice cannot pass."""

from __future__ import annotations

import json
from typing import Any

from app.records import EDITABLE_FIELDS, validate_create
from tests.chaos.audit import Audit, DeviceState, ServerState, audit, check_values

ENTITY = "6f1c2b9e-8d0a-4c47-9b1e-2a5f3c7d8e90"
CREATE = {"title": "WO phone-0", "notes": "phone-0"}


def job(job_id: int, key: str, op: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"id": job_id, "idempotency_key": key, "entity_key": ENTITY, "status": "done",
            "last_error": None, "payload": json.dumps({"op": op, "fields": fields})}  # fmt: skip


def record(version: int, **fields: Any) -> dict[str, Any]:
    return {"id": ENTITY, **validate_create(CREATE), **fields, "version": version}


def run(server_site: str, answered_v3_site: str) -> Audit:
    """phone creates the work order, sets site twice; the server holds `server_site`."""
    jobs = [
        job(1, "k1", "create", CREATE),
        job(2, "k2", "update", {"site": "site phone-1"}),
        job(3, "k3", "update", {"site": "site phone-2"}),
    ]
    device = DeviceState("phone", jobs, {}, {}, {}, [["done", str(i), str(i)] for i in (1, 2, 3)])
    server = ServerState(
        records={ENTITY: record(3, site=server_site)},
        device_ids={"phone": 1},
        effects={(1, "k1"): (201, ENTITY), (1, "k2"): (200, ENTITY), (1, "k3"): (200, ENTITY)},
        answered={
            (1, "k1"): record(1),
            (1, "k2"): record(2, site="site phone-1"),
            (1, "k3"): record(3, site=answered_v3_site),
        },
    )
    result = audit(server, [device])
    check_values(server, [device], result)
    return result


def test_the_last_acknowledged_value_passes() -> None:
    result = run("site phone-2", "site phone-2")
    assert result.wrong_values == []
    assert result.values_checked == len(EDITABLE_FIELDS)


def test_an_earlier_edits_value_on_the_server_is_caught_and_named() -> None:
    result = run("site phone-1", "site phone-2")
    assert not result.ok
    assert len(result.wrong_values) == 1
    assert "'site phone-1'" in result.wrong_values[0]
    assert "phone job 3 (update)" in result.wrong_values[0]


def test_an_answer_that_does_not_follow_from_the_edits_before_it_is_caught() -> None:
    result = run("site phone-2", "site phone-1")
    assert any(problem.startswith(f"{ENTITY} v3.site") for problem in result.wrong_values)
