"""Browser: a phone's failed change under Failed; a conflict decided in the console reaches it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from app.sync.conflicts import Conflicts
from server.embedded import EmbeddedServer
from tests.e2e.console.conftest import screenshot, sign_in
from tests.e2e.console.phones import Phone
from tests.sync.sync_support import Fault


@pytest.fixture
def crew(office: EmbeddedServer, tmp_path: Path) -> Iterator[tuple[Phone, Phone]]:
    """Two phones of one person, so they share that person's work orders."""
    a = Phone(office, tmp_path, "phone-a", user="ana", team="north")
    b = Phone(office, tmp_path, "phone-b", user="ana", team="north")
    yield a, b
    a.close()
    b.close()


def test_a_failed_change_on_a_phone_appears_under_failed(
    page: Page, office: EmbeddedServer, crew: tuple[Phone, Phone]
) -> None:
    phone, _ = crew
    entity = phone.store.record_edit(
        "create", None, {"title": "Valve at gate 3", "assignee": "ana"}
    ).entity_id
    # The server refuses the create for good (a 422 the phone cannot fix by retrying).
    phone.transport.plan(Fault("status", status=422))
    phone.sync(batch_size=1)
    sign_in(page, office)
    page.get_by_role("link", name="Failed changes").click()
    row = page.locator(f'tr[data-entity="{entity}"]')
    expect(row).to_contain_text("Valve at gate 3")
    expect(row).to_contain_text("phone-a")
    expect(row).to_contain_text("ana")
    expect(row.locator("code")).not_to_be_empty()
    screenshot(page, "failed")
    # The fleet counts it too, linking to the phone's list.
    page.get_by_role("link", name="Fleet").click()
    page.locator('tr[data-device="phone-a"]').get_by_role("link", name="1").click()
    expect(page.get_by_text("Showing the phone phone-a only.")).to_be_visible()


def test_resolve_a_conflict_and_the_phone_gets_the_outcome(
    page: Page, office: EmbeddedServer, crew: tuple[Phone, Phone]
) -> None:
    a, b = crew
    entity = a.store.record_edit("create", None, {"title": "Pump", "assignee": "ana"}).entity_id
    a.sync()
    b.sync()
    b.store.record_edit("update", entity, {"title": "Pump (B)"})
    b.sync()
    job = a.store.record_edit("update", entity, {"title": "Pump (A)"}).job_id
    a.sync()
    Conflicts(a.store).escalate(job, note="which pump?")
    a.sync()
    assert Conflicts(a.store).get(job).status == "escalated"

    sign_in(page, office)
    page.get_by_role("link", name="Conflicts").click()
    page.get_by_role("link", name="Pump (B)").click()
    title = page.locator('tr[data-field="title"]')
    # Before (what phone A's edit started from), the device's, the server's.
    expect(title.locator("td").nth(1)).to_have_text("Pump")
    expect(title.locator("td").nth(2)).to_have_text("Pump (A)")
    expect(title.locator("td").nth(3)).to_have_text("Pump (B)")
    expect(page.locator("main > p", has_text="raised by phone-a")).to_contain_text("which pump?")
    screenshot(page, "conflict")
    title.get_by_label("Another:").check()
    title.get_by_label("Value for title").fill("Pump 2 (office)")
    page.get_by_role("button", name="Resolve").click()
    expect(page.get_by_role("status")).to_contain_text("Resolved by ada (console)")
    expect(page.locator("ol.audit")).to_contain_text("resolved")

    a.sync()
    assert Conflicts(a.store).get(job).status == "resolved"
    assert a.store.cache.get(entity)["title"] == "Pump 2 (office)"
