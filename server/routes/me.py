"""`GET /v1/me`: who this device is, for the person holding it."""

from __future__ import annotations

from fastapi import APIRouter

from server.access import Action
from server.http import CurrentDevice, declare
from server.openapi.answers import Identity, error_responses

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["scope"])


@router.get(
    "/me",
    dependencies=[declare(Action.IDENTIFY)],
    responses={200: {"model": Identity}, **error_responses(401, 429, invalid=None)},
)
def me(device: CurrentDevice) -> dict[str, str]:
    """This device: its name, the person using it, their team and the device's role."""
    return {"device": device.name, "user": device.user, "team": device.team, "role": device.role}
