"""Console sessions and the doors every page passes: signed in, admin, CSRF token.

The session cookie carries 256 random bits; the table keeps only their sha256, as device
tokens are kept (server/auth.py). Each session has its own CSRF token, which every
state-changing form carries in a hidden `csrf_token` field; a POST without the session's
token is refused with 403. The sign-in form, before any session, is protected the
double-submit way: a random cookie and the same value in the form.
Only the cookie opens the console: an `Authorization` header is never read here, and the
cookie never opens `/v1/` (server/http.py reads only bearer tokens).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from starlette.datastructures import FormData

from server.console.models import ConsoleTables
from server.console.users import OfficeUser, find_user
from server.db.store import Store
from server.settings import Settings

__all__ = [
    "SESSION_COOKIE",
    "AdminUser",
    "ConsoleDenied",
    "ConsoleState",
    "NotSignedIn",
    "SignedIn",
    "Visit",
    "checked_form",
    "end_session",
    "start_session",
]

SESSION_COOKIE = "fieldsync_console"
SIGN_IN_COOKIE = "fieldsync_console_sign_in"


@dataclass(frozen=True)
class ConsoleState:
    """What the console's pages need; stored on `app.state.console`."""

    settings: Settings
    store: Store
    tables: ConsoleTables


class NotSignedIn(Exception):
    """No valid session: the answer is a 303 to the sign-in page."""


class ConsoleDenied(Exception):
    """Signed in but not allowed (or a missing CSRF token): a 403 page."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Visit:
    """A signed-in request: who, and the CSRF token their forms carry."""

    user: OfficeUser
    csrf_token: str
    session_token: str


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def console_state(request: Request) -> ConsoleState:
    state: ConsoleState = request.app.state.console
    return state


def start_session(state: ConsoleState, user: OfficeUser) -> str:
    """A new session for `user`; the cookie's token (its only clear copy)."""
    token = secrets.token_urlsafe(32)
    now = state.settings.clock()
    sessions = state.tables.Session
    sessions.delete().where(sessions.expires_at < now).execute()
    sessions.create(
        token_hash=_hash(token),
        user_id=user.id,
        csrf_token=secrets.token_urlsafe(32),
        created_at=now,
        expires_at=now + state.settings.console_session_seconds,
    )
    return token


def end_session(state: ConsoleState, token: str) -> None:
    sessions = state.tables.Session
    sessions.delete().where(sessions.token_hash == _hash(token)).execute()


def _visit(request: Request) -> Visit:
    state = console_state(request)
    token = request.cookies.get(SESSION_COOKIE, "")
    if not token or len(token) > 128:
        raise NotSignedIn
    sessions = state.tables.Session
    row = sessions.get_or_none(sessions.token_hash == _hash(token))
    if row is None or row.expires_at <= state.settings.clock():
        raise NotSignedIn
    user = find_user(state.tables, row.user_id)
    if user is None:
        raise NotSignedIn
    request.state.device_name = f"console:{user.name}"  # the access log's who
    return Visit(user, row.csrf_token, token)


SignedIn = Annotated[Visit, Depends(_visit)]


def _admin(visit: SignedIn) -> Visit:
    if not visit.user.is_admin:
        raise ConsoleDenied("Only an admin may manage people and devices.")
    return visit


AdminUser = Annotated[Visit, Depends(_admin)]


def tokens_match(presented: object, expected: str) -> bool:
    return (
        isinstance(presented, str)
        and bool(expected)
        and hmac.compare_digest(presented.encode(), expected.encode())
    )


async def checked_form(request: Request, visit: Visit) -> FormData:
    """The POSTed form, once its `csrf_token` is the session's; 403 otherwise."""
    form = await request.form()
    if not tokens_match(form.get("csrf_token"), visit.csrf_token):
        raise ConsoleDenied("The form's security token is missing or stale: reload the page.")
    return form
