"""`POST` and `DELETE /v1/pins/{id}`: keep a work order offline on every device of a person."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from server.access import Action
from server.auth import AuthenticatedDevice
from server.gate import enforce, gate_for
from server.http import ApiError, Context, CurrentDevice, ServerContext, declare
from server.openapi.answers import PinReply, error_responses
from server.scope.pins import set_pin
from server.wire import wire_entity_id

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["scope"])


def _pin(context: ServerContext, device: AuthenticatedDevice, entity_id: str, on: bool) -> Any:
    canonical = wire_entity_id(entity_id)
    table = context.store.tables.WorkOrder
    row = table.get_or_none(table.id == canonical) if canonical else None
    action = Action.PIN if on else Action.UNPIN
    enforce(gate_for(context, device).order(action, canonical or "", row))
    assert row is not None
    if not set_pin(context.store, device.user, row.id, on):
        raise ApiError(404, {"error": "not_found"})
    return {"id": row.id, "pinned": on}


_PIN_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": PinReply},
    **error_responses(401, 404, 429),
}


@router.post("/pins/{entity_id}", dependencies=[declare(Action.PIN)], responses=_PIN_RESPONSES)
def pin(context: Context, device: CurrentDevice, entity_id: str) -> Any:
    """Keep a work order on every device of this person ("Keep offline"); idempotent."""
    return _pin(context, device, entity_id, True)


@router.delete("/pins/{entity_id}", dependencies=[declare(Action.UNPIN)], responses=_PIN_RESPONSES)
def unpin(context: Context, device: CurrentDevice, entity_id: str) -> Any:
    """Stop keeping it (it stays while another rule holds it); idempotent."""
    return _pin(context, device, entity_id, False)
