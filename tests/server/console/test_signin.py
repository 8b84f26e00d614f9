"""Signing in to the console: the form's contract, cookies, CSRF, limits, and its two doors."""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx

from server.embedded import EmbeddedServer, start_server
from tests.server.console.conftest import ADMIN_PASSWORD, DISPATCHER_PASSWORD
from tests.support.console import ConsoleClient, add_office_user, csrf_of


def test_without_a_session_the_console_sends_to_the_sign_in_form(office: EmbeddedServer) -> None:
    for path in ("/console/", "/console/people"):
        reply = httpx.get(office.base_url + path, follow_redirects=False)
        assert reply.status_code == 303
        assert reply.headers["location"] == "/console/login"


def test_the_sign_in_form_has_labelled_fields_and_a_hidden_token(office: EmbeddedServer) -> None:
    html = httpx.get(office.base_url + "/console/login").text
    assert re.search(r'<label for="username">User name</label>', html)
    assert re.search(r'<label for="password">Password</label>', html)
    assert '<input id="username" name="username"' in html
    assert re.search(r'<input id="password" name="password" type="password"', html)
    assert re.search(r'<input type="hidden" name="csrf_token" value="[^"]{20,}">', html)


def test_a_good_sign_in_opens_the_console_with_a_strict_cookie(
    make_client: Callable[[], ConsoleClient],
) -> None:
    client = make_client()
    reply = client.sign_in("ada", ADMIN_PASSWORD)
    assert reply.status_code == 303
    assert reply.headers["location"] == "/console/"
    cookie = next(
        value
        for key, value in reply.headers.multi_items()
        if value.startswith("fieldsync_console=")
    )
    attributes = {part.strip().lower() for part in cookie.split(";")}
    assert "httponly" in attributes
    assert "samesite=strict" in attributes
    assert "secure" not in attributes  # plain HTTP here; see the next test
    home = client.get("/console/")
    assert home.status_code == 200
    assert "Signed in as ada, admin." in home.text


def test_secure_cookies_behind_tls(sqlite_url: str) -> None:
    add_office_user(sqlite_url, "ada", "admin", ADMIN_PASSWORD)
    with (
        start_server(sqlite_url, console_secure_cookies=True) as server,
        httpx.Client(base_url=server.base_url, follow_redirects=False) as http,
    ):
        form = http.get("/console/login")
        assert "; secure" in form.headers["set-cookie"].lower()
        # httpx keeps Secure cookies off plain HTTP, as a browser does: hand it over.
        sign_in_cookie = form.headers["set-cookie"].split(";")[0]
        reply = http.post(
            "/console/login",
            data={
                "username": "ada",
                "password": ADMIN_PASSWORD,
                "csrf_token": csrf_of(form.text),
            },
            headers={"Cookie": sign_in_cookie},
        )
    assert reply.status_code == 303
    session = [v for k, v in reply.headers.multi_items() if v.startswith("fieldsync_console=")]
    assert "; secure" in session[0].lower()


def test_a_wrong_password_is_refused_and_opens_nothing(
    make_client: Callable[[], ConsoleClient],
) -> None:
    client = make_client()
    for name, password in (("ada", "not it"), ("nobody", ADMIN_PASSWORD), ("", "")):
        reply = client.sign_in(name, password)
        assert reply.status_code == 401
        assert "Wrong user name or password." in reply.text
        assert "fieldsync_console=" not in reply.headers.get("set-cookie", "")
    assert client.get("/console/").status_code == 303


def test_sign_in_without_the_form_token_is_forbidden(office: EmbeddedServer) -> None:
    reply = httpx.post(
        office.base_url + "/console/login",
        data={"username": "ada", "password": ADMIN_PASSWORD},
        follow_redirects=False,
    )
    assert reply.status_code == 403
    assert (
        "set-cookie" not in reply.headers or "fieldsync_console=" not in reply.headers["set-cookie"]
    )


def test_sign_out_ends_the_session_and_needs_the_token(admin_console: ConsoleClient) -> None:
    cookie = admin_console.http.cookies["fieldsync_console"]
    refused = admin_console.http.post("/console/logout", data={})
    assert refused.status_code == 403
    assert admin_console.get("/console/").status_code == 200
    reply = admin_console.post("/console/logout")
    assert reply.status_code == 303
    assert reply.headers["location"] == "/console/login"
    # The old cookie, presented again, opens nothing: the session is gone on the server.
    again = httpx.get(
        str(admin_console.http.base_url) + "/console/",
        headers={"Cookie": f"fieldsync_console={cookie}"},
        follow_redirects=False,
    )
    assert again.status_code == 303


def test_refused_sign_ins_are_limited_per_name(make_client: Callable[[], ConsoleClient]) -> None:
    client = make_client()
    for _ in range(5):
        assert client.sign_in("ada", "guess").status_code == 401
    # Even the right password waits now: the limit does not tell a guesser which one was right.
    blocked = client.sign_in("ada", ADMIN_PASSWORD)
    assert blocked.status_code == 429
    assert int(blocked.headers["retry-after"]) > 0
    assert "Too many refused sign-ins" in blocked.text
    # Another name from the same address is not held up by ada's.
    assert client.sign_in("dan", DISPATCHER_PASSWORD).status_code == 303


def test_refused_sign_ins_are_limited_per_address(sqlite_url: str) -> None:
    add_office_user(sqlite_url, "ada", "admin", ADMIN_PASSWORD)
    with start_server(sqlite_url, console_sign_in_failures_per_address=3) as server:
        client = ConsoleClient(server.base_url)
        for number in range(3):
            assert client.sign_in(f"guess-{number}", "guess").status_code == 401
        assert client.sign_in("ada", ADMIN_PASSWORD).status_code == 429
        client.close()


def test_the_limit_lifts_after_the_window(sqlite_url: str) -> None:
    add_office_user(sqlite_url, "ada", "admin", ADMIN_PASSWORD)
    now = [1_800_000_000.0]
    with start_server(sqlite_url, clock=lambda: now[0]) as server:
        client = ConsoleClient(server.base_url)
        for _ in range(5):
            client.sign_in("ada", "guess")
        assert client.sign_in("ada", ADMIN_PASSWORD).status_code == 429
        now[0] += 901
        assert client.sign_in("ada", ADMIN_PASSWORD).status_code == 303
        client.close()


def test_a_device_token_does_not_open_the_console(office: EmbeddedServer) -> None:
    token = office.add_device("office-tablet", "admin")
    reply = httpx.get(
        office.base_url + "/console/",
        headers={"Authorization": f"Bearer {token}"},
        follow_redirects=False,
    )
    assert reply.status_code == 303
    assert reply.headers["location"] == "/console/login"


def test_a_console_session_does_not_open_the_api(admin_console: ConsoleClient) -> None:
    cookie = admin_console.http.cookies["fieldsync_console"]
    base = str(admin_console.http.base_url)
    for path in ("/v1/changes", "/v1/conflicts", "/metrics"):
        reply = httpx.get(base + path, headers={"Cookie": f"fieldsync_console={cookie}"})
        assert reply.status_code == 401, path


def test_a_dispatcher_cannot_open_people(
    dispatcher_console: ConsoleClient, admin_console: ConsoleClient
) -> None:
    refused = dispatcher_console.get("/console/people")
    assert refused.status_code == 403
    assert "Only an admin may manage people and devices." in refused.text
    assert admin_console.get("/console/people").status_code == 200


def test_pages_carry_the_session_token_for_their_forms(admin_console: ConsoleClient) -> None:
    html = admin_console.get("/console/").text
    assert csrf_of(html) == admin_console.csrf_token
    assert admin_console.get("/console/").headers["cache-control"] == "no-store"
