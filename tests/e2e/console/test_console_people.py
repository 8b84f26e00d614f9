"""Browser: add a phone (token once, QR code), view as it, revoke it and it is shut out."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from server.embedded import EmbeddedServer
from tests.e2e.console.conftest import screenshot, sign_in
from tests.e2e.console.phones import Phone


def test_add_a_device_and_sign_it_in_with_the_token_shown(
    page: Page, office: EmbeddedServer
) -> None:
    sign_in(page, office)
    page.get_by_role("link", name="People").click()
    screenshot(page, "people")
    page.get_by_label("Device name").fill("phone-new")
    page.get_by_label("Person", exact=True).fill("ana")
    page.get_by_label("Team", exact=True).fill("north")
    page.get_by_role("button", name="Add device").click()
    expect(page.locator("p.notice")).to_have_text(re.compile("This token is shown only now"))
    expect(page.get_by_role("img", name="Sign-in code for phone-new")).to_be_visible()
    token = page.get_by_label("Token of phone-new").inner_text().strip()
    screenshot(page, "device-added")
    me = httpx.get(f"{office.base_url}/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert me.json() == {**me.json(), "user": "ana", "team": "north"}


def test_revoke_a_device_and_its_next_request_gets_401(
    page: Page, office: EmbeddedServer, tmp_path: Path
) -> None:
    phone = Phone(office, tmp_path, "phone-a", user="ana", team="north")
    try:
        phone.store.record_edit("create", None, {"title": "Hinge", "assignee": "ana"})
        phone.sync()
        assert phone.get("/v1/changes").status_code == 200
        sign_in(page, office)
        page.goto(f"{office.base_url}/console/people")
        page.get_by_role("link", name="View as phone-a").click()
        expect(page.locator("tbody")).to_contain_text("Hinge")
        screenshot(page, "view-as-device")
        page.goto(f"{office.base_url}/console/people")
        page.get_by_role("button", name="Revoke phone-a").click()
        expect(page.locator('tr[data-device="phone-a"]')).to_contain_text("Revoked")
        assert phone.get("/v1/changes").status_code == 401
    finally:
        phone.close()
