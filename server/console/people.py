"""People (`/console/people`): office users and the devices of the field, for admins only."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from server.auth import list_devices
from server.console.render import page
from server.console.sessions import AdminUser, console_state
from server.console.users import list_users

__all__ = ["router"]

router = APIRouter()


@router.get("/people", response_class=HTMLResponse)
def people_page(request: Request, visit: AdminUser) -> HTMLResponse:
    state = console_state(request)
    return page(
        request,
        "people.html",
        visit,
        {
            "title": "People and devices",
            "office_users": list_users(state.tables),
            "devices": list_devices(state.store),
        },
    )
