"""A console visitor over plain HTTP: signs in through the form, posts with its CSRF token."""

from __future__ import annotations

import re
from typing import Any

import httpx

from server.console.models import console_tables
from server.console.users import add_user
from server.db.store import open_store

__all__ = ["ConsoleClient", "add_office_user", "csrf_of"]

_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = _CSRF.search(html)
    assert found, "the page has no csrf_token field"
    return found.group(1)


def add_office_user(db_url: str, name: str, role: str, password: str) -> None:
    store = open_store(db_url)
    try:
        add_user(console_tables(store), name, role, password)
    finally:
        store.close()


class ConsoleClient:
    """One browser's cookies; redirects are not followed, so tests see every 303."""

    def __init__(self, base_url: str) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=30.0, follow_redirects=False)
        self.csrf_token = ""

    def sign_in(self, name: str, password: str) -> httpx.Response:
        form = self.http.get("/console/login")
        assert form.status_code == 200, form.text
        reply = self.http.post(
            "/console/login",
            data={"username": name, "password": password, "csrf_token": csrf_of(form.text)},
        )
        if reply.status_code == 303:
            self.csrf_token = csrf_of(self.http.get("/console/").text)
        return reply

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.http.get(path, **kwargs)

    def post(self, path: str, data: dict[str, Any] | None = None, **kwargs: Any) -> httpx.Response:
        """A form post carrying the session's CSRF token (unless `data` gives its own)."""
        return self.http.post(path, data={"csrf_token": self.csrf_token, **(data or {})}, **kwargs)

    def close(self) -> None:
        self.http.close()
