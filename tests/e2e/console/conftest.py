"""The console in a real browser: Playwright driving Debian's Chromium (launched by its path,
as `playwright install` cannot download one here), one browser per module, a fresh context
(cookies) per test, against the real server in-process with an injected clock."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from server.embedded import EmbeddedServer, start_server
from tests.support.console import add_office_user

CHROMIUM = Path(os.environ.get("FIELDSYNC_CHROMIUM", "/usr/bin/chromium"))
_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
ADMIN = ("ada", "admin password 1")
DISPATCHER = ("dan", "dispatcher password 1")
#: Where `FIELDSYNC_CONSOLE_SCREENSHOTS=1` writes the README's pictures of each page.
SCREENSHOTS = Path(__file__).resolve().parents[3] / "docs" / "console"


class Clock:
    """The server's wall clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: sh scripts/system-deps.sh test", pytrace=False)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def office(tmp_path: Path, clock: Clock) -> Iterator[EmbeddedServer]:
    url = f"sqlite:///{tmp_path / 'server.sqlite3'}"
    add_office_user(url, *ADMIN[:1], "admin", ADMIN[1])
    add_office_user(url, *DISPATCHER[:1], "dispatcher", DISPATCHER[1])
    with start_server(url, clock=clock, rate_limit_per_second=0) as running:
        yield running


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="light")
    context.set_default_timeout(15_000)
    opened = context.new_page()
    yield opened
    context.close()


def sign_in(page: Page, server: EmbeddedServer, who: tuple[str, str] = ADMIN) -> None:
    page.goto(f"{server.base_url}/console/")
    page.get_by_label("User name").fill(who[0])
    page.get_by_label("Password").fill(who[1])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{server.base_url}/console/")


def screenshot(page: Page, name: str) -> None:
    """The README's picture of this page, when asked for (it changes with every run)."""
    if os.environ.get("FIELDSYNC_CONSOLE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
