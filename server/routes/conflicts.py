"""Review-queue endpoints under `/v1/conflicts` (raise, list, read, resolve, dismiss)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from app.records import ValidationError, printable
from server.access import Action
from server.auth import AuthenticatedDevice
from server.db.idempotency import IdempotentCall, Reply, execute_idempotent, request_hash
from server.db.models import BIGINT_MAX, INTEGER_MAX
from server.db.store import ChangeSequence
from server.gate import enforce, gate_for
from server.http import (
    ApiError,
    Context,
    CurrentDevice,
    IdempotencyKeyHeader,
    declare,
    reply_response,
)
from server.openapi.answers import (
    ConflictList,
    ConflictNotOpen,
    ConflictReply,
    DecisionReply,
    KeyInUse,
    KeyProblem,
    KeyReused,
    UnreadableBody,
    VersionConflict,
    error_responses,
)
from server.records.conflicts import (
    STATUSES,
    audit_entries,
    conflict_json,
    decide,
    load_visible,
    raise_conflict,
)
from server.records.mutations import validation_detail
from server.wire import JsonInteger, UrlInteger, patch_fields, wire_entity_id

__all__ = ["router"]

router = APIRouter(prefix="/v1/conflicts", tags=["review queue"])


class RaiseConflict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    entity_id: str
    base_version: JsonInteger | None = Field(default=None, ge=1, le=INTEGER_MAX)
    mine: dict[str, Any]
    #: The values the worker's edit started from, for the reviewer's "before".
    base: dict[str, Any] | None = None
    note: Annotated[str, Field(max_length=2000), AfterValidator(printable)] | None = None


ConflictId = Annotated[int, Path(ge=1, le=BIGINT_MAX), UrlInteger]


class Resolution(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    fields: dict[str, Any]
    base_version: JsonInteger = Field(ge=1)


def _decider(context: Context, device: CurrentDevice) -> AuthenticatedDevice:
    """The device, if the access rule lets it decide conflicts (403 before the body is read)."""
    enforce(gate_for(context, device).general(Action.DECIDE_CONFLICT))
    return device


Decider = Annotated[AuthenticatedDevice, Depends(_decider)]


def _patch(fields: dict[str, Any]) -> dict[str, Any]:
    try:
        return patch_fields(fields)
    except (ValidationError, ValueError) as error:
        detail = validation_detail(error)
        raise ApiError(422, {"error": "invalid_payload", "detail": detail}) from None


@router.post(
    "",
    status_code=201,
    dependencies=[declare(Action.RAISE_CONFLICT)],
    response_model=None,
    responses={
        201: {"model": ConflictReply},
        **error_responses(
            401,
            404,
            413,
            429,
            bad_request=(KeyProblem, UnreadableBody),
            conflict=(KeyInUse,),
            invalid=(KeyReused,),
        ),
    },
)
def post_conflict(
    context: Context,
    device: CurrentDevice,
    idempotency_key: IdempotencyKeyHeader,
    body: RaiseConflict,
) -> JSONResponse:
    """Send a change for an admin's review instead of overwriting or dropping it."""
    entity_id = wire_entity_id(body.entity_id)
    if entity_id is None:
        raise ApiError(422, {"error": "invalid_payload", "detail": "entity_id"})
    mine = _patch(body.mine)
    base = None if body.base is None else _patch(body.base)
    canonical: dict[str, Any] = {
        "entity_id": entity_id,
        "base_version": body.base_version,
        "mine": mine,
        "note": body.note,
    }
    if base is not None:  # absent, a retry from before `base` hashes as it did
        canonical["base"] = base

    gate = gate_for(context, device)

    def effect(sequence: ChangeSequence) -> Reply:
        return raise_conflict(
            context.store, device, entity_id, body.base_version, mine, body.note, gate, base
        )

    call = IdempotentCall(idempotency_key, request_hash("conflict", canonical), effect)
    [reply] = execute_idempotent(context.store, device.id, [call], context.settings)
    if reply.status == 201 and not reply.replayed:
        context.metrics.inc("fieldsync_conflicts_raised_total", device.name)
    return reply_response(reply)


@router.get(
    "",
    dependencies=[declare(Action.READ_CONFLICT)],
    response_model=None,
    responses={200: {"model": ConflictList}, **error_responses(401, 429)},
)
def list_conflicts(
    context: Context,
    device: CurrentDevice,
    status: Annotated[str | None, Query(description="open, resolved or dismissed")] = None,
) -> dict[str, Any]:
    """An admin sees every device's conflicts, a worker only its own."""
    if status is not None and status not in STATUSES:
        raise ApiError(422, {"error": "invalid_payload", "detail": f"status: one of {STATUSES}"})
    table = context.store.tables.Conflict
    query = table.select().order_by(table.id)
    if status is not None:
        query = query.where(table.status == status)
    if not gate_for(context, device).reads_others(Action.READ_CONFLICT):
        query = query.where(table.device_id == device.id)
    return {"conflicts": [conflict_json(row) for row in query]}


@router.get(
    "/{conflict_id}",
    dependencies=[declare(Action.READ_CONFLICT)],
    response_model=None,
    responses={200: {"model": ConflictReply}, **error_responses(401, 404, 429)},
)
def get_conflict(
    context: Context, device: CurrentDevice, conflict_id: ConflictId
) -> dict[str, Any]:
    """One conflict with its audit trail (404 for another worker's)."""
    row = load_visible(context.store, gate_for(context, device), conflict_id)
    if row is None:
        raise ApiError(404, {"error": "not_found"})
    return {"conflict": conflict_json(row, audit_entries(context.store, row.id))}


@router.post(
    "/{conflict_id}/resolve",
    dependencies=[declare(Action.DECIDE_CONFLICT)],
    responses={
        200: {"model": DecisionReply},
        **error_responses(
            401,
            403,
            404,
            413,
            429,
            bad_request=(UnreadableBody,),
            conflict=(VersionConflict, ConflictNotOpen),
        ),
    },
)
def resolve_conflict(
    context: Context, admin: Decider, conflict_id: ConflictId, body: Resolution
) -> JSONResponse:
    """Apply the merged fields as a normal change; 409 if the record moved meanwhile."""
    fields = _patch(body.fields)
    reply = decide(context.store, admin, conflict_id, fields, body.base_version)
    return reply_response(reply)


@router.post(
    "/{conflict_id}/dismiss",
    dependencies=[declare(Action.DECIDE_CONFLICT)],
    responses={
        200: {"model": DecisionReply},
        **error_responses(401, 403, 404, 413, 429, conflict=(ConflictNotOpen,)),
    },
)
def dismiss_conflict(context: Context, admin: Decider, conflict_id: ConflictId) -> JSONResponse:
    """Close the conflict; the server's version stands."""
    return reply_response(decide(context.store, admin, conflict_id, None, None))
