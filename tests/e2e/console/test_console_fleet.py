"""Browser: signing in, the fleet's colours, the doors a dispatcher and a forged form meet."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from server.embedded import EmbeddedServer
from tests.e2e.console.conftest import DISPATCHER, Clock, screenshot, sign_in
from tests.e2e.console.phones import Phone

_DAY = 86_400.0


@pytest.fixture
def phones(office: EmbeddedServer, tmp_path: Path) -> Iterator[dict[str, Phone]]:
    made = {
        "phone-a": Phone(office, tmp_path, "phone-a", user="ana", team="north"),
        "phone-b": Phone(office, tmp_path, "phone-b", user="bo", team="south"),
    }
    yield made
    for phone in made.values():
        phone.close()


def test_sign_in_and_out(page: Page, office: EmbeddedServer) -> None:
    page.goto(f"{office.base_url}/console/")
    expect(page).to_have_url(f"{office.base_url}/console/login")
    screenshot(page, "sign-in")
    page.get_by_label("User name").fill("ada")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("Wrong user name or password.")
    sign_in(page, office)
    expect(page.get_by_text("Signed in as ada, admin.")).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(f"{office.base_url}/console/login")
    page.goto(f"{office.base_url}/console/devices")
    expect(page).to_have_url(f"{office.base_url}/console/login")


def test_a_synced_phone_is_green_and_one_eight_days_behind_red(
    page: Page, office: EmbeddedServer, phones: dict[str, Phone], clock: Clock
) -> None:
    phones["phone-b"].store.record_edit("create", None, {"title": "Old pump", "assignee": "bo"})
    phones["phone-b"].sync()
    clock.now += 8 * _DAY
    phones["phone-a"].sync()
    sign_in(page, office)
    page.get_by_role("link", name="Fleet").click()
    fresh = page.locator('tr[data-device="phone-a"] td.last-sync')
    stale = page.locator('tr[data-device="phone-b"] td.last-sync')
    expect(fresh).to_contain_text("just now")
    expect(stale).to_contain_text("8 d ago")
    # The colours the person sees: the app Theme's green and red.
    expect(fresh).to_have_css("color", "rgb(46, 125, 50)")
    expect(stale).to_have_css("color", "rgb(198, 40, 40)")
    expect(stale).to_contain_text("far behind")  # not by colour alone
    screenshot(page, "fleet")
    # Filtered by team: only the south phone.
    page.get_by_label("Team").select_option("south")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("tbody tr")).to_have_count(1)
    expect(page.locator('tr[data-device="phone-b"]')).to_be_visible()


def test_the_fleet_updates_itself_while_open(
    page: Page, office: EmbeddedServer, phones: dict[str, Phone]
) -> None:
    sign_in(page, office)
    page.goto(f"{office.base_url}/console/devices")
    cell = page.locator('tr[data-device="phone-a"] td.last-sync')
    expect(cell).to_contain_text("Never")
    phones["phone-a"].sync()
    # No reload: the page's htmx poll brings the new row within its 10 s.
    expect(cell).to_contain_text("just now", timeout=25_000)


def test_a_dispatcher_cannot_open_people(page: Page, office: EmbeddedServer) -> None:
    sign_in(page, office, DISPATCHER)
    page.get_by_role("link", name="People").click()
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    expect(page.get_by_role("alert")).to_have_text("Only an admin may manage people and devices.")


def test_a_form_without_its_csrf_token_is_refused(page: Page, office: EmbeddedServer) -> None:
    sign_in(page, office)
    page.locator('form.signout input[name="csrf_token"]').evaluate("input => input.remove()")
    with page.expect_response(lambda r: r.url.endswith("/console/logout")) as answer:
        page.get_by_role("button", name="Sign out").click()
    assert answer.value.status == 403
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    page.goto(f"{office.base_url}/console/")
    expect(page.get_by_text("Signed in as ada, admin.")).to_be_visible()  # still signed in
