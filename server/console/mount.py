"""Putting the console on the server's app: its routes, static files and error pages."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from server.console import (
    audit,
    conflicts,
    failed,
    fleet,
    home,
    people,
    signin,
    work_order,
    work_orders,
)
from server.console.models import console_tables
from server.console.render import page
from server.console.sessions import ConsoleDenied, ConsoleState, NotSignedIn
from server.db.store import Store
from server.settings import Settings

__all__ = ["mount_console"]

_STATIC = Path(__file__).parent / "static"


def mount_console(app: FastAPI, settings: Settings, store: Store) -> None:
    """Serve the console under `/console/` from the same process, database and settings."""
    app.state.console = ConsoleState(settings=settings, store=store, tables=console_tables(store))
    for module in (
        signin,
        home,
        people,
        fleet,
        failed,
        conflicts,
        work_orders,
        work_order,
        audit,
    ):
        app.include_router(module.router, prefix="/console", include_in_schema=False)
    app.mount("/console/static", StaticFiles(directory=_STATIC), name="console-static")

    async def on_not_signed_in(request: Request, error: Exception) -> Response:
        return RedirectResponse("/console/login", status_code=303)

    async def on_denied(request: Request, error: Exception) -> HTMLResponse:
        assert isinstance(error, ConsoleDenied)
        return page(request, "denied.html", None, {"reason": error.reason}, status_code=403)

    app.add_exception_handler(NotSignedIn, on_not_signed_in)
    app.add_exception_handler(ConsoleDenied, on_denied)
