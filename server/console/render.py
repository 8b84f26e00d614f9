"""Rendering console pages from `templates/` with Jinja2 (autoescaped)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from app.words import FIELD_LABELS
from server.console.sessions import Visit

__all__ = ["age_words", "page", "templates"]

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")


def age_words(seconds: float | None) -> str:
    """ "5 min ago" style words for an age in seconds; "Never" for None."""
    if seconds is None:
        return "Never"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return "just now"
    for unit, size in (("d", 86_400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


def iso_at(epoch: float | None) -> str:
    if epoch is None:
        return ""
    moment = dt.datetime.fromtimestamp(epoch, dt.UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


templates.env.filters["iso_at"] = iso_at
#: The fields' labels, as the phone's screens show them (`app.words`, their one home).
templates.env.globals["labels"] = FIELD_LABELS


def page(
    request: Request,
    name: str,
    visit: Visit | None,
    context: dict[str, Any] | None = None,
    *,
    status_code: int = 200,
) -> HTMLResponse:
    """`templates/<name>` for this visit (its user and CSRF token reach every page)."""
    values: dict[str, Any] = {
        "user": visit.user if visit else None,
        "csrf_token": visit.csrf_token if visit else "",
        "path": request.url.path,
        **(context or {}),
    }
    response: HTMLResponse = templates.TemplateResponse(
        request, name, values, status_code=status_code
    )
    response.headers["Cache-Control"] = "no-store"
    return response
