"""The console's front page: what needs the office's attention, in numbers."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from server.console.render import page
from server.console.sessions import SignedIn

__all__ = ["router"]

router = APIRouter()


@router.get("/", response_class=HTMLResponse)
def front_page(request: Request, visit: SignedIn) -> HTMLResponse:
    return page(request, "home.html", visit, {"title": "Overview"})
