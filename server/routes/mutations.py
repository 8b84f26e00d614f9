"""`POST /v1/mutations` and `POST /v1/mutations/batch`: keyed, version-checked changes."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Body, Header
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from server.access import Action
from server.auth import AuthenticatedDevice
from server.db.idempotency import IdempotentCall, Reply, execute_idempotent, request_hash
from server.db.store import ChangeSequence
from server.gate import Gate, gate_for
from server.http import (
    ApiError,
    Context,
    CurrentDevice,
    IdempotencyKeyHeader,
    ServerContext,
    declare,
    idempotency_key_problem,
    reply_response,
)
from server.metrics import Metrics
from server.openapi.answers import (
    BatchReply,
    KeyInUse,
    KeyProblem,
    KeyReused,
    RecordReply,
    UnreadableBody,
    VersionConflict,
    error_responses,
)
from server.records.batch import apply_mutation_batch
from server.records.history import Author
from server.records.mutations import (
    InvalidMutation,
    ValidMutation,
    apply_mutation,
    validate_creates,
    validate_mutation,
)
from server.routing.one_hop import OneHopRoute
from server.scope.echoes import INSTALL_DESCRIPTION, INSTALL_HEADER, note_install
from server.wire import Mutation

__all__ = ["count_reply", "router"]

#: One worker-thread hop per request: the device is read in the endpoint's thread.
router = APIRouter(prefix="/v1", tags=["mutations"], route_class=OneHopRoute)

_KIND = "mutation"

#: Sent with a device's writes: a new install gets its floor before its first write lands.
InstallHeader = Annotated[str | None, Header(alias=INSTALL_HEADER, description=INSTALL_DESCRIPTION)]


class BatchRequest(BaseModel):
    """Mutations each carrying its own `idempotency_key`; validated one by one."""

    mutations: list[dict[str, Any]] = Field(
        description="Up to 500 items: {idempotency_key, entity_id, op, base_version, fields}"
    )


def count_reply(metrics: Metrics, device: str, reply: Reply) -> None:
    """Feed the Prometheus counters from a mutation's answer."""
    metrics.inc(reply_metric(reply), device)


def reply_metric(reply: Reply) -> str:
    """The counter a mutation's answer adds to."""
    if reply.replayed:
        return "fieldsync_idempotent_replays_total"
    if reply.status in (200, 201):
        return "fieldsync_mutations_applied_total"
    error = reply.body.get("error")
    if error == "idempotency_key_reused":
        return "fieldsync_idempotency_key_reused_total"
    if error == "idempotency_key_in_use":
        return "fieldsync_idempotency_key_in_use_total"
    if error == "version_conflict":
        return "fieldsync_version_conflicts_total"
    return "fieldsync_mutations_rejected_total"


def _echoable(key: object) -> bool:
    try:
        json.dumps(key, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError):
        return False
    return True


def _call(
    context: ServerContext,
    device: AuthenticatedDevice,
    gate: Gate,
    key: str,
    mutation: ValidMutation,
) -> IdempotentCall:
    def effect(sequence: ChangeSequence) -> Reply:
        return apply_mutation(
            context.store,
            mutation,
            device.name,
            sequence,
            creator=device.user,
            gate=gate,
            author=Author.of_device(device),
        )

    canonical = mutation.canonical()  # validated: text, integers, booleans and null
    return IdempotentCall(key, request_hash(_KIND, canonical, plain=True), effect)


def _invalid(detail: Any) -> Reply:
    return Reply(422, {"error": "invalid_payload", "detail": detail})


@router.post(
    "/mutations",
    dependencies=[declare(Action.WRITE)],
    responses={
        200: {"model": RecordReply, "description": "update/delete applied"},
        201: {"model": RecordReply, "description": "create applied"},
        **error_responses(
            401,
            404,
            413,
            429,
            bad_request=(KeyProblem, UnreadableBody),
            conflict=(VersionConflict, KeyInUse),
            invalid=(KeyReused,),
        ),
    },
)
def post_mutation(
    context: Context,
    device: CurrentDevice,
    idempotency_key: IdempotencyKeyHeader,
    install: InstallHeader = None,
    mutation: Mutation = Body(...),  # noqa: B008 - FastAPI's declaration style
) -> JSONResponse:
    """Apply one mutation at most once per (device, Idempotency-Key)."""
    note_install(context.store, device, install)
    try:
        valid = validate_mutation(mutation)  # FastAPI validated it as `Mutation` already
    except InvalidMutation as error:
        reply = _invalid(error.detail)
    else:
        [reply] = execute_idempotent(
            context.store,
            device.id,
            [_call(context, device, gate_for(context, device), idempotency_key, valid)],
            context.settings,
        )
    count_reply(context.metrics, device.name, reply)
    return reply_response(reply)


@router.post(
    "/mutations/batch",
    dependencies=[declare(Action.WRITE)],
    response_model=None,
    responses={
        200: {"model": BatchReply, "description": "One result per mutation, in order"},
        **error_responses(401, 413, 429, bad_request=(UnreadableBody,)),
    },
)
def post_batch(
    context: Context, device: CurrentDevice, batch: BatchRequest, install: InstallHeader = None
) -> Response:
    """Up to 500 mutations in one request; each item has the single endpoint's semantics."""
    if len(batch.mutations) > context.settings.max_batch_items:
        limit = context.settings.max_batch_items
        raise ApiError(422, {"error": "invalid_payload", "detail": f"at most {limit} mutations"})
    note_install(context.store, device, install)
    gate = gate_for(context, device)
    keys: list[Any] = []
    early: dict[int, Reply] = {}
    calls: list[IdempotentCall] = []
    mutations: list[ValidMutation] = []
    positions: list[int] = []
    keyed: list[tuple[int, Any, dict[str, Any]]] = []
    for index, item in enumerate(batch.mutations):
        raw = dict(item)
        key = raw.pop("idempotency_key", None)
        keys.append(key)
        problem = idempotency_key_problem(key)
        if problem is not None:
            early[index] = Reply(400, problem)
            continue
        keyed.append((index, key, raw))
    creates = validate_creates([raw for _, _, raw in keyed])
    for (index, key, raw), valid in zip(keyed, creates, strict=True):
        if valid is None:
            try:
                valid = validate_mutation(raw)
            except InvalidMutation as error:
                early[index] = _invalid(error.detail)
                continue
        calls.append(_call(context, device, gate, key, valid))
        mutations.append(valid)
        positions.append(index)

    def apply_all(sequence: ChangeSequence, claimed: Sequence[int]) -> list[Reply]:
        chosen = [mutations[position] for position in claimed]
        try:
            return apply_mutation_batch(
                context.store,
                chosen,
                device.name,
                sequence,
                creator=device.user,
                gate=gate,
                author=Author.of_device(device),
            )
        except Exception:
            gate.forget_pending()  # rolled back: the items are applied one by one instead
            raise

    replies = dict(early)
    if calls:
        done = execute_idempotent(
            context.store, device.id, calls, context.settings, batch_effect=apply_all
        )
        replies.update(zip(positions, done, strict=True))
    results = []
    counted: Counter[str] = Counter()  # one increment per counter, not per item
    usable = set(positions)  # their keys are text JSON carries (idempotency_key_problem)
    for index, key in enumerate(keys):
        reply = replies[index]
        counted[reply_metric(reply)] += 1
        result: dict[str, Any] = {
            # Echoed as sent when JSON can carry it (a NaN or a lone surrogate cannot).
            "idempotency_key": key if index in usable or _echoable(key) else None,
            "status": reply.status,
            "body": reply.body,
            "replayed": reply.replayed,
        }
        if reply.retry_after is not None:
            result["retry_after"] = reply.retry_after
        results.append(result)
    for metric, amount in counted.items():
        context.metrics.inc(metric, device.name, amount)
    # The results are plain JSON already; FastAPI's jsonable_encoder pass over up to 500
    # records would cost more than the database work, and orjson encodes them several times
    # faster than the standard library (which answers what orjson refuses).
    try:
        return Response(orjson.dumps({"results": results}), media_type="application/json")
    except TypeError:
        return JSONResponse({"results": results})
