"""Signing in and out of the console, with refused attempts limited per name and address."""

from __future__ import annotations

import math
import secrets

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from server.console.render import page
from server.console.sessions import (
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    ConsoleDenied,
    ConsoleState,
    NotSignedIn,
    _visit,
    console_state,
    end_session,
    start_session,
    tokens_match,
)
from server.console.users import OfficeUser, check_password

__all__ = ["router"]

router = APIRouter()


def _address(request: Request) -> str:
    return (request.client.host if request.client else "")[:64]


def _sign_in_form(
    request: Request, *, error: str = "", name: str = "", status_code: int = 200
) -> HTMLResponse:
    token = secrets.token_urlsafe(32)
    response = page(
        request,
        "login.html",
        None,
        {"sign_in_token": token, "error": error, "name": name},
        status_code=status_code,
    )
    _set_cookie(request, response, SIGN_IN_COOKIE, token, max_age=3600)
    return response


def _set_cookie(
    request: Request, response: Response, name: str, value: str, *, max_age: int
) -> None:
    state = console_state(request)
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path="/console",
        httponly=True,
        samesite="strict",
        secure=state.settings.console_secure_cookies,
    )


@router.get("/login", response_class=HTMLResponse)
def sign_in_page(request: Request) -> HTMLResponse:
    return _sign_in_form(request)


def _wait_seconds(state: ConsoleState, name: str, address: str) -> int | None:
    """Seconds until another attempt is allowed, or None if it is allowed now."""
    settings = state.settings
    now = settings.clock()
    window = settings.console_sign_in_window_seconds
    failures = state.tables.SignInFailure
    failures.delete().where(failures.at < now - window).execute()
    for column, value, allowed in (
        (failures.name, name, settings.console_sign_in_failures_per_name),
        (failures.address, address, settings.console_sign_in_failures_per_address),
    ):
        recent = failures.select(failures.at).where(column == value).order_by(failures.at.desc())
        times = [row.at for row in recent.limit(allowed)]
        if len(times) >= allowed:
            return max(1, math.ceil(times[-1] + window - now))
    return None


def _attempt(state: ConsoleState, name: str, password: str, address: str) -> OfficeUser | int:
    """The user, or the seconds to wait before trying again (0: just wrong)."""
    wait = _wait_seconds(state, name[:100], address)
    if wait is not None:
        return wait
    user = check_password(state.tables, name, password)
    if user is None:
        state.tables.SignInFailure.create(
            name=name[:100], address=address, at=state.settings.clock()
        )
        return 0
    return user


@router.post("/login", response_class=HTMLResponse)
async def sign_in(request: Request) -> Response:
    state = console_state(request)
    form = await request.form()
    if not tokens_match(form.get("csrf_token"), request.cookies.get(SIGN_IN_COOKIE, "")):
        raise ConsoleDenied("The sign-in form's security token is missing: reload the page.")
    name = str(form.get("username") or "").strip()
    password = str(form.get("password") or "")
    outcome = await run_in_threadpool(_attempt, state, name, password, _address(request))
    if isinstance(outcome, int):
        if outcome:
            minutes = math.ceil(outcome / 60)
            response = _sign_in_form(
                request,
                error=f"Too many refused sign-ins. Try again in {minutes} min.",
                name=name,
                status_code=429,
            )
            response.headers["Retry-After"] = str(outcome)
            return response
        return _sign_in_form(
            request, error="Wrong user name or password.", name=name, status_code=401
        )
    token = await run_in_threadpool(start_session, state, outcome)
    signed_in = RedirectResponse("/console/", status_code=303)
    lifetime = int(state.settings.console_session_seconds)
    _set_cookie(request, signed_in, SESSION_COOKIE, token, max_age=lifetime)
    signed_in.delete_cookie(SIGN_IN_COOKIE, path="/console")
    return signed_in


@router.post("/logout")
async def sign_out(request: Request) -> Response:
    state = console_state(request)
    try:
        visit = await run_in_threadpool(_visit, request)
    except NotSignedIn:
        return RedirectResponse("/console/login", status_code=303)
    form = await request.form()
    if not tokens_match(form.get("csrf_token"), visit.csrf_token):
        raise ConsoleDenied("The form's security token is missing or stale: reload the page.")
    await run_in_threadpool(end_session, state, visit.session_token)
    response = RedirectResponse("/console/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/console")
    return response
