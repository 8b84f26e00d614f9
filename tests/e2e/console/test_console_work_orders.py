"""Browser: find work orders, reassign two of them at once, and the phones' scopes follow."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from server.embedded import EmbeddedServer
from tests.e2e.console.conftest import screenshot, sign_in
from tests.e2e.console.phones import Phone
from tests.support.api import ServerApi


def _titles(phone: Phone) -> set[str]:
    rows = phone.store.read("SELECT title FROM work_orders")
    return {row[0] for row in rows}


def test_bulk_reassign_and_the_phones_scopes_follow(
    page: Page, office: EmbeddedServer, tmp_path: Path
) -> None:
    ana = Phone(office, tmp_path, "phone-ana", user="ana", team="")
    bo = Phone(office, tmp_path, "phone-bo", user="bo", team="")
    try:
        # Made in the office, so only their assignee puts them in a phone's scope.
        office_api = ServerApi(office.base_url, office.add_device("office", "admin"))
        for title in ("Pump A", "Pump B", "Roof C"):
            office_api.create(title=title, assignee="ana")
        office_api.close()
        ana.sync()
        bo.sync()
        assert _titles(ana) == {"Pump A", "Pump B", "Roof C"}
        assert _titles(bo) == set()

        sign_in(page, office)
        page.get_by_role("link", name="Work orders").click()
        page.get_by_label("Search").fill("pump")
        page.get_by_role("button", name="Find").click()
        expect(page.locator("tbody tr")).to_have_count(2)
        page.get_by_label("Pick Pump A").check()
        page.get_by_label("Pick Pump B").check()
        page.get_by_label("New assignee").fill("bo")
        page.get_by_role("button", name="Reassign").click()
        expect(page.get_by_role("alert")).to_have_text(
            "This changes 2 work orders: type 2 to confirm."
        )
        page.get_by_label("Pick Pump A").check()
        page.get_by_label("Pick Pump B").check()
        page.get_by_label("New assignee").fill("bo")
        page.get_by_label("Type how many are picked to confirm").fill("2")
        screenshot(page, "work-orders")
        page.get_by_role("button", name="Reassign").click()
        expect(page.get_by_role("status")).to_have_text("Reassigned 2 work order(s).")

        ana.sync()
        bo.sync()
        assert _titles(ana) == {"Roof C"}
        assert _titles(bo) == {"Pump A", "Pump B"}

        page.get_by_role("link", name="Pump A").click()
        expect(page.locator("ol.history")).to_contain_text("work_order.reassign")
        changes = page.get_by_role("list", name="Changes, newest first")
        expect(changes).to_contain_text("Changed by ada, from the console (version 2)")
        expect(changes).to_contain_text("Assignee: ana → bo")
        expect(changes).to_contain_text("Created by office on office, from the device")
        screenshot(page, "work-order")
    finally:
        ana.close()
        bo.close()
