"""The invariant checker: the server's database against what every device intended.

A device's intent is its own jobs table (one row per local edit, never deleted during a run)
plus its append-only intent log; the server's truth is its database: work orders with their
versions, and one idempotency row per (device, key) holding the status of its single effect.

    lost        a job the device holds as done whose effect the server does not have, or an
                edit the intent log calls durable that is missing from the jobs table
    duplicated  a server effect no done job accounts for, or a record whose version is not
                1 + the number of applied updates the idempotency rows record
    stranded    a job still leased, or pending but not waiting behind a conflicted or dead
                edit of the same work order, after the final clean sync
    wrong value a field on the server that does not hold the value of the last acknowledged
                job that set it (`check_values`): every edit writes a marker unique to it, so
                an edit applied out of order, twice over a later one, or half, shows here
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.records import EDITABLE_FIELDS, validate_create, validate_patch

__all__ = [
    "Audit",
    "DeviceState",
    "ServerState",
    "audit",
    "check_values",
    "read_device",
    "read_server",
]


@dataclass
class ServerState:
    records: dict[str, dict[str, Any]]
    device_ids: dict[str, int]
    #: (device id, key) -> (status code, entity id or None)
    effects: dict[tuple[int, str], tuple[int | None, str | None]]
    #: (device id, key) -> the record the server answered with (200/201 effects only)
    answered: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    #: keys whose claim is still `processing` (a request in flight, or abandoned by a crash)
    in_use: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class DeviceState:
    name: str
    jobs: list[dict[str, Any]]
    cache: dict[str, dict[str, Any]]
    counters: dict[str, int]
    conflicts: dict[int, str]
    log: list[list[str]]
    #: Edits made before the runner started (not in the intent log).
    setup_jobs: int = 0


@dataclass
class Audit:
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    stranded: list[str] = field(default_factory=list)
    unexplained: list[str] = field(default_factory=list)
    diverged: list[str] = field(default_factory=list)
    wrong_values: list[str] = field(default_factory=list)
    #: Fields compared with the last acknowledged job that set them (`check_values`).
    values_checked: int = 0
    server_records: int = 0
    intended: int = 0
    applied: int = 0
    conflicts: int = 0
    dead: int = 0
    already_applied: int = 0
    replays_detected: int = 0
    #: Pending edits waiting behind a conflicted or dead edit of the same work order.
    held_behind_conflict: int = 0

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.duplicated
            or self.stranded
            or self.unexplained
            or self.diverged
            or self.wrong_values
        )

    def problems(self) -> str:
        parts = []
        for name in ("lost", "duplicated", "stranded", "unexplained", "diverged", "wrong_values"):
            items = getattr(self, name)
            if items:
                parts.append(f"{name} ({len(items)}): " + "; ".join(items[:10]))
        return "\n".join(parts)


def _ro(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    return conn


def _server_rows(target: Path | str, sql: str) -> list[dict[str, Any]]:
    """Rows of the server's database: a SQLite file, or a `postgresql://` URL."""
    if isinstance(target, str):
        import psycopg2
        import psycopg2.extras

        pg = psycopg2.connect(target)
        try:
            with pg.cursor(cursor_factory=psycopg2.extras.RealDictCursor) as cursor:
                cursor.execute(sql)
                return [dict(row) for row in cursor.fetchall()]
        finally:
            pg.close()
    conn = _ro(target)
    try:
        return [dict(row) for row in conn.execute(sql)]
    finally:
        conn.close()


def read_server(target: Path | str) -> ServerState:
    """The server's state, from its SQLite file (a Path) or its PostgreSQL URL."""
    records = {row["id"]: row for row in _server_rows(target, "SELECT * FROM work_order")}
    devices = {
        row["name"]: row["id"] for row in _server_rows(target, "SELECT id, name FROM device")
    }
    effects: dict[tuple[int, str], tuple[int | None, str | None]] = {}
    answered: dict[tuple[int, str], dict[str, Any]] = {}
    in_use: list[tuple[int, str]] = []
    for row in _server_rows(
        target, "SELECT device_id, key, state, status_code, response_body FROM idempotency_key"
    ):
        where = (row["device_id"], row["key"])
        entity = None
        if row["response_body"]:
            body = json.loads(row["response_body"])
            record = body.get("record") or body.get("current") or {}
            entity = record.get("id")
            if row["status_code"] in (200, 201) and body.get("record"):
                answered[where] = body["record"]
        status = row["status_code"] if row["state"] == "done" else None
        if row["state"] != "done":
            in_use.append(where)
        effects[where] = (status, entity)
    return ServerState(records, devices, effects, answered, in_use)


def read_device(name: str, data_dir: Path) -> DeviceState:
    conn = _ro(data_dir / "fieldsync.sqlite3")
    try:
        jobs = [dict(row) for row in conn.execute("SELECT * FROM jobs ORDER BY id")]
        cache = {row["id"]: dict(row) for row in conn.execute("SELECT * FROM work_orders")}
        counters = {row["name"]: row["value"] for row in conn.execute("SELECT * FROM counters")}
        conflicts = {
            row["job_id"]: row["kind"] for row in conn.execute("SELECT job_id, kind FROM conflicts")
        }
    finally:
        conn.close()
    log_path = data_dir / "intents.log"
    log = (
        [line.split(" ", 2) for line in log_path.read_text().splitlines() if line.strip()]
        if log_path.exists()
        else []
    )
    return DeviceState(name, jobs, cache, counters, conflicts, log)


def audit(server: ServerState, devices: list[DeviceState]) -> Audit:
    result = Audit(server_records=len(server.records))
    acknowledged: set[tuple[int, str]] = set()
    for device in devices:
        _audit_device(server, device, result, acknowledged)
    # Every effect the server applied must be a done job of the device that sent it.
    updates_per_record: Counter[str] = Counter()
    creates_per_record: Counter[str] = Counter()
    for (device_id, key), (status, entity) in server.effects.items():
        if status not in (200, 201) or entity is None:
            continue
        result.applied += 1
        if status == 201:
            creates_per_record[entity] += 1
        else:
            updates_per_record[entity] += 1
        if (device_id, key) not in acknowledged:
            result.duplicated.append(f"effect of key {key} (device {device_id}) not a done job")
    for entity, record in server.records.items():
        if creates_per_record[entity] != 1:
            result.duplicated.append(f"{entity} created {creates_per_record[entity]} times")
        if record["version"] != 1 + updates_per_record[entity]:
            result.duplicated.append(
                f"{entity} at version {record['version']} after "
                f"{updates_per_record[entity]} recorded updates"
            )
    for device in devices:
        _compare_cache(server, device, result)
    return result


def _audit_device(
    server: ServerState, device: DeviceState, result: Audit, acknowledged: set[tuple[int, str]]
) -> None:
    device_id = server.device_ids[device.name]
    result.intended += len(device.jobs)
    result.replays_detected += device.counters.get("duplicates_detected", 0)
    by_id = {job["id"]: job for job in device.jobs}
    durable = [entry for entry in device.log if entry[0] == "done"]
    for entry in durable:
        if len(entry) > 2 and entry[2].isdigit() and int(entry[2]) not in by_id:
            result.lost.append(f"{device.name}: logged edit {entry[1]} has no job {entry[2]}")
    if len(durable) + device.setup_jobs != len(device.jobs):
        result.unexplained.append(
            f"{device.name}: {len(durable)} durable edits logged (+{device.setup_jobs} setup) "
            f"but {len(device.jobs)} jobs"
        )
    already = 0
    for job in device.jobs:
        where = f"{device.name} job {job['id']} ({json.loads(job['payload'])['op']})"
        status = job["status"]
        if status == "pending" and _held_behind(device, job):
            result.held_behind_conflict += 1
            continue
        if status in ("pending", "leased"):
            result.stranded.append(f"{where} still {status}")
            continue
        if status in ("conflict", "dead"):
            if not job["last_error"]:
                result.unexplained.append(f"{where} {status} without a reason")
            if status == "conflict":
                result.conflicts += 1
                if job["id"] not in device.conflicts:
                    result.unexplained.append(f"{where} conflict without a conflict record")
            else:
                result.dead += 1
            effect = server.effects.get((device_id, job["idempotency_key"]))
            if effect is not None and effect[0] in (200, 201):
                result.duplicated.append(f"{where} held as {status} but applied by the server")
            continue
        effect = server.effects.get((device_id, job["idempotency_key"]))
        if effect is None or effect[0] is None:
            result.lost.append(f"{where} done but unknown to the server")
        elif effect[0] in (200, 201):
            acknowledged.add((device_id, job["idempotency_key"]))
        elif effect[0] == 409:
            already += 1  # intent already applied (reply lost, key expired): no new effect
        else:
            result.lost.append(f"{where} done but the server answered {effect[0]}")
    if already != device.counters.get("conflicts_already_applied", 0):
        result.lost.append(
            f"{device.name}: {already} done jobs without an effect, "
            f"{device.counters.get('conflicts_already_applied', 0)} counted as already applied"
        )
    result.already_applied += already


def _held_behind(device: DeviceState, job: dict[str, Any]) -> bool:
    return any(
        other["entity_key"] == job["entity_key"]
        and other["id"] < job["id"]
        and other["status"] in ("conflict", "dead")
        for other in device.jobs
    )


def _compare_cache(server: ServerState, device: DeviceState, result: Audit) -> None:
    outstanding = {
        job["entity_key"]
        for job in device.jobs
        if job["status"] in ("pending", "leased", "conflict", "dead")
    }
    for entity, record in server.records.items():
        if entity in outstanding:
            continue
        cached = device.cache.get(entity)
        if cached is None:
            result.diverged.append(f"{device.name} lacks {entity}")
            continue
        for name in (*EDITABLE_FIELDS, "version"):
            mine = cached["server_version"] if name == "version" else cached[name]
            theirs = record[name]
            if name == "deleted":
                mine, theirs = bool(mine), bool(theirs)
            if mine != theirs:
                result.diverged.append(
                    f"{device.name} {entity}.{name}: device {mine!r} != server {theirs!r}"
                )


def _normal(name: str, value: Any) -> Any:
    return bool(value) if name == "deleted" else value


def check_values(server: ServerState, devices: list[DeviceState], result: Audit) -> None:
    """Replay every acknowledged job in the order the server applied it (the version its
    answer carried) and compare each field of each record, and each stored answer, with it.

    Only done jobs whose key the server applied (200/201) count: those are the edits the
    device was told took effect. A field no job set holds the create's default."""
    applied: dict[str, list[tuple[int, str, dict[str, Any], str, dict[str, Any]]]] = {}
    for device in devices:
        device_id = server.device_ids[device.name]
        for job in device.jobs:
            where = (device_id, job["idempotency_key"])
            record = server.answered.get(where)
            if job["status"] != "done" or record is None:
                continue
            payload = json.loads(job["payload"])
            label = f"{device.name} job {job['id']} ({payload['op']})"
            applied.setdefault(str(record["id"]), []).append(
                (int(record["version"]), payload["op"], payload.get("fields") or {}, label, record)
            )
    for entity, record in server.records.items():
        history = sorted(applied.get(entity, []), key=lambda step: step[0])
        if not history or history[0][1] != "create":
            result.wrong_values.append(f"{entity}: no acknowledged create")
            continue
        expected: dict[str, Any] = {}
        setter: dict[str, str] = {}
        for version, op, fields, label, answer in history:
            if op == "create":
                changes = validate_create(fields)
            elif op == "update":
                changes = validate_patch(fields)
            else:
                changes = {"deleted": True}
            expected.update(changes)
            setter.update(dict.fromkeys(changes, label))
            for name, value in expected.items():
                if _normal(name, answer[name]) != _normal(name, value):
                    result.wrong_values.append(
                        f"{entity} v{version}.{name}: answered {answer[name]!r}, "
                        f"expected {value!r} from {setter[name]}"
                    )
        for name in EDITABLE_FIELDS:
            result.values_checked += 1
            if _normal(name, record[name]) != _normal(name, expected.get(name)):
                result.wrong_values.append(
                    f"{entity}.{name} on the server {record[name]!r}, but the last "
                    f"acknowledged job that set it ({setter.get(name)}) wrote "
                    f"{expected.get(name)!r}"
                )
