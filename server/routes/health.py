"""Operations: `GET /healthz` for load balancers and `GET /metrics` (Prometheus) for admins."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response

from server.http import Admin, Context
from server.openapi.answers import error_responses

__all__ = ["router"]

router = APIRouter(tags=["operations"])

_PROMETHEUS_TEXT = "text/plain; version=0.0.4"


_OK = b'{"status":"ok"}'


@router.get("/healthz", response_model=dict[str, str])
async def healthz() -> Response:
    # On the event loop, with the body encoded once: a load balancer's probe costs no thread
    # hop and no serialisation.
    return Response(_OK, media_type="application/json")


@router.get(
    "/metrics",
    # A bare Response class keeps FastAPI from documenting a 200 body of its own, and lets
    # the JSON error bodies be documented as JSON rather than as the text/plain of a 200.
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text exposition format",
            "content": {_PROMETHEUS_TEXT: {"schema": {"type": "string"}}},
        },
        **error_responses(401, 403, 429, invalid=None),
    },
)
def metrics(context: Context, admin: Admin) -> PlainTextResponse:
    return PlainTextResponse(context.metrics.render(), media_type=_PROMETHEUS_TEXT)
