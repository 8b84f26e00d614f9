"""Each QML page loaded in the real window and driven by clicks and typing.

Screenshots of every page at phone and desktop size, light and dark, go to test-artifacts/;
every page is checked for items sticking out past the phone width and for small touch targets.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

from app.credentials import NoKeyringError
from app.store.store import Store
from tests.ui.app_driver import settle
from tests.ui.conftest import Open, Runner, add_orders, make_conflict, make_dead
from tests.ui.qml_driver import (
    click,
    find,
    overflowing,
    screenshot,
    too_small_targets,
    type_into,
    walk,
)
from ui.main import show_page
from ui.qt import QColor, QQuickWindow
from ui.services import Services

SIZES = [(360, 720), (1280, 800)]


def check_layout(window: QQuickWindow) -> None:
    if window.width() <= 400:
        assert overflowing(window) == []
        assert too_small_targets(window) == []


@pytest.fixture
def seeded(store: Store) -> Store:
    add_orders(store, 40, assignee="Ana")
    make_dead(store, title="Fix gate hinge")
    make_dead(
        store, title="Meter reading", error="gave up after 12 attempts: connect timeout", status=0
    )
    make_conflict(store)
    return store


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_every_page_renders_fits_and_is_captured(
    run: Runner, open_window: Open, seeded: Store, artifacts: Path, size, dark: bool
) -> None:
    app_vm, window = open_window(*size, dark=dark)
    window_colour = QColor(window.property("color"))
    assert (window_colour.lightnessF() < 0.5) == dark
    for page in (
        "list",
        "editor",
        "conflict",
        "dead",
        "diagnostics",
        "signin",
        "review",
        "settings",
    ):
        run(show_page(app_vm, page))
        settle(run, app_vm)
        assert app_vm.page == page
        check_layout(window)
        theme = "dark" if dark else "light"
        screenshot(window, artifacts / f"{page}-{size[0]}x{size[1]}-{theme}.png")
        if size[0] < 900 and page != "list":
            click(window, find(window, "backButton"))
            assert app_vm.page == "list"


def test_list_search_and_open_then_back(run: Runner, open_window: Open, seeded: Store) -> None:
    app_vm, window = open_window()
    type_into(window, find(window, "searchField"), "00007")
    run.until(lambda: app_vm.workOrders.total == 1)
    settle(run, app_vm)
    click(window, find(window, "workOrderRow_0"))
    settle(run, app_vm)
    assert app_vm.page == "editor"
    assert find(window, "titleField").property("text") == "Pump check 00007"
    click(window, find(window, "backButton"))
    assert app_vm.page == "list"


def test_badge_tap_shows_the_reason(run: Runner, open_window: Open, seeded: Store) -> None:
    app_vm, window = open_window()
    # "Fix gate hinge" sorts first and failed: tapping its badge explains.
    row = find(window, "workOrderRow_0")
    assert app_vm.workOrders.get(0)["badge"] == "failed"
    badge_area = next(c for c in walk(row) if c.objectName() == "badgeTapArea")
    click(window, badge_area)
    detail = next(c for c in walk(row) if c.objectName() == "badgeDetail")
    run.until(lambda: detail.isVisible())
    assert "could not be delivered" in detail.property("text")


def test_editor_validates_then_saves_with_pending_badge(
    run: Runner, open_window: Open, store: Store
) -> None:
    app_vm, window = open_window()
    click(window, find(window, "newButton"))
    settle(run, app_vm)
    assert app_vm.title == "New work order"
    type_into(window, find(window, "titleField"), "   ")
    run.until(lambda: find(window, "titleError").property("text") != "")
    assert not find(window, "saveButton").isEnabled()
    type_into(window, find(window, "titleField"), "Inspect boiler")
    # The due date is picked from the calendar (issue 24), not typed: a day of this month.
    due = datetime.date.today().replace(day=28)
    click(window, find(window, "dueDateField"))
    run.until(lambda: find(window, "dueDateFieldPicker").property("opened"))
    click(window, find(window, f"day_{due.isoformat()}"))
    run.until(lambda: app_vm.editor.fields["due_date"] == due.isoformat())
    assert find(window, "dueDateField").property("text") == due.strftime("%a %-d %b %Y")
    run.until(lambda: find(window, "saveButton").isEnabled())
    click(window, find(window, "saveButton"))
    settle(run, app_vm)
    run.until(lambda: app_vm.workOrders.total == 1)
    settle(run, app_vm)
    assert app_vm.workOrders.get(0)["badge"] == "pending"
    assert app_vm.editor.unsynced
    assert find(window, "unsyncedBanner").isVisible()
    assert app_vm.title == "Work order"


def test_dead_letter_retry_edit_and_discard(
    run: Runner, open_window: Open, store: Store, artifacts: Path
) -> None:
    first = make_dead(store, title="Fix gate hinge")
    second = make_dead(store, title="Meter reading")
    app_vm, window = open_window(1280, 800)
    app_vm.open("dead")
    settle(run, app_vm)
    dead = app_vm.deadLetters
    assert dead.count == 2
    # Edit with an invalid payload: refused with the reason, nothing sent.
    dead.select(first)
    settle(run, app_vm)
    # The JSON is behind "Details" (the form is the first way to fix a change).
    click(window, find(window, "detailsButton"))
    editor = find(window, "payloadEditor")
    run.until(editor.isVisible)
    editor.setProperty("text", '{"op": "create", "fields": {"title": ""}}')
    click(window, find(window, "retryEditedButton"))
    run.until(lambda: "title" in find(window, "editError").property("text"))
    # A valid edit goes back to the queue under a new idempotency key.
    key_before = store.db.execute_sql(
        "SELECT idempotency_key FROM jobs WHERE id = ?", (first,)
    ).fetchone()[0]
    editor.setProperty(
        "text", '{"op": "create", "fields": {"title": "Fix gate hinge", "site": "Yard"}}'
    )
    click(window, find(window, "retryEditedButton"))
    run.until(lambda: dead.count == 1)
    status, key_after = store.db.execute_sql(
        "SELECT status, idempotency_key FROM jobs WHERE id = ?", (first,)
    ).fetchone()
    assert status == "pending"
    assert key_after != key_before
    # Discard asks first, then writes the audit log.
    settle(run, app_vm)
    assert dead.selectedJobId == second
    click(window, find(window, "discardButton"))
    run.until(lambda: find(window, "confirmDiscard").isVisible())
    assert dead.count == 1  # nothing discarded before the person confirms
    screenshot(window, artifacts / "dead-confirm-discard-1280x800-light.png")
    click(window, find(window, "confirmDiscardButton"))
    run.until(lambda: dead.count == 0)
    audit = store.db.execute_sql("SELECT action, job_id FROM audit_log").fetchall()
    assert ("discard", second) in audit


def test_dead_letter_retry_unchanged_and_export(
    run: Runner, open_window: Open, store: Store
) -> None:
    job_id = make_dead(store)
    app_vm, window = open_window()
    app_vm.open("dead")
    settle(run, app_vm)
    click(window, find(window, "deadCheck_0"))
    assert app_vm.deadLetters.checkedCount == 1
    path = app_vm.deadLetters.exportChecked()
    settle(run, app_vm)
    assert f'"job_id": {job_id}' in Path(path).read_text()
    retry = find(window, "retryButton")
    click(window, retry)
    run.until(lambda: app_vm.deadLetters.count == 0)
    assert store.db.execute_sql("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone() == (
        "pending",
    )


def test_conflict_resolved_per_field_sends_the_merged_record(
    run: Runner, open_window: Open, store: Store
) -> None:
    entity_id, job_id = make_conflict(store)
    app_vm, window = open_window()
    settle(run, app_vm)
    app_vm.openWorkOrder(entity_id)
    settle(run, app_vm)
    click(window, find(window, "resolveConflictButton"))
    settle(run, app_vm)
    assert app_vm.page == "conflict"
    assert app_vm.conflicts.hasCurrent
    assert "dispatcher-anna" in find(window, "conflictExplanation").property("text")
    assert not find(window, "resolveButton").isEnabled()
    click(window, find(window, "mine_notes"))
    run.until(lambda: find(window, "resolveButton").isEnabled())
    click(window, find(window, "resolveButton"))
    run.until(lambda: app_vm.page == "list")
    status, payload, base = store.db.execute_sql(
        "SELECT status, payload, base_version FROM jobs WHERE id = ?", (job_id,)
    ).fetchone()
    assert status == "pending"
    assert base == 2
    assert json.loads(payload)["fields"]["notes"] == "Gasket replaced"
    record = store.cache.get(entity_id)
    assert record is not None
    assert (record["notes"], record["site"], record["priority"]) == (
        "Gasket replaced",
        "Pump house 2",
        "high",
    )


def test_taking_all_theirs_asks_first(run: Runner, open_window: Open, store: Store) -> None:
    # "Keep all mine" and "Take all theirs" decide the whole conflict at once, unlike the
    # per-field buttons beside them: one stray tap used to throw an edit away unasked.
    entity_id, job_id = make_conflict(store)
    app_vm, window = open_window()
    settle(run, app_vm)
    app_vm.resolveConflictFor(entity_id)
    settle(run, app_vm)
    click(window, find(window, "takeAllTheirsButton"))
    settle(run, app_vm)
    assert find(window, "confirmAll").isVisible()
    assert app_vm.page == "conflict"
    assert store.db.execute_sql("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone() == (
        "conflict",
    )
    click(window, find(window, "confirmAllButton"))
    run.until(lambda: app_vm.page == "list")
    decided = store.db.execute_sql("SELECT status FROM conflicts WHERE job_id = ?", (job_id,))
    assert decided.fetchone() == ("resolved",)


def test_sign_in_shows_the_keyring_problem(
    run: Runner, open_window: Open, store: Store, services: Services
) -> None:
    app_vm, window = open_window()
    services.bridge.authRequired.emit("https://sync.example.org", "token revoked")
    assert app_vm.page == "signin"
    assert "token revoked" in find(window, "reasonLabel").property("text")

    def no_keyring(url: str, token: str) -> None:
        raise NoKeyringError("no D-Bus session")

    app_vm.signIn._store_token = no_keyring
    type_into(window, find(window, "tokenField"), "secret-token")
    click(window, find(window, "signInButton"))
    run.until(lambda: find(window, "signInError").property("text") != "")
    message = find(window, "signInError").property("text")
    assert "No usable system keyring" in message
    assert "FIELDSYNC_TOKEN" in message
    assert "secret-token" not in message
    assert app_vm.page == "signin"

    stored: list[tuple[str, str]] = []
    app_vm.signIn._store_token = lambda url, token: stored.append((url, token))
    click(window, find(window, "signInButton"))
    run.until(lambda: app_vm.page == "list")
    assert stored == [("https://sync.example.org", "secret-token")]


def test_diagnostics_and_status_bar(run: Runner, open_window: Open, seeded: Store) -> None:
    app_vm, window = open_window()
    app_vm.open("diagnostics")
    settle(run, app_vm)
    facts = {f["label"]: f["text"] for f in app_vm.diagnostics.facts}
    assert facts["Failed (need a person)"] == "2"
    assert facts["Open conflicts"] == "1"
    click(window, find(window, "refreshButton"))
    settle(run, app_vm)
    assert len(app_vm.diagnostics.depthSeries) >= 2
    assert find(window, "connectivityLabel").property("text") == "Sync is not running"
    click(window, find(window, "syncNowButton"))


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_high_contrast_text_stands_out_on_every_button(
    run: Runner, open_window: Open, seeded: Store, dark: bool
) -> None:
    # Before: on the dark high-contrast palette every button's words were black on black.
    app_vm, window = open_window(360, 720, dark=dark, high_contrast=True)
    for page in ("list", "editor", "conflict", "dead"):
        run(show_page(app_vm, page))
        settle(run, app_vm)
        buttons = [
            item
            for item in walk(window.contentItem())
            if item.isVisible() and item.metaObject().className().startswith("FsButton")
        ]
        assert buttons, page
        for button in buttons:
            ink = QColor(button.property("contentItem").property("color"))
            paper = QColor(button.property("background").property("color"))
            assert abs(ink.lightnessF() - paper.lightnessF()) > 0.9, (
                f"{page}: {button.objectName() or button.property('text')}"
            )


@pytest.mark.parametrize("state", ["online", "offline", "unreachable", "signed_out", "paused"])
def test_phone_status_bar_keeps_two_whole_lines(
    run: Runner, open_window: Open, seeded: Store, services: Services, state: str
) -> None:
    app_vm, window = open_window(360, 720)
    services.bridge.connectivityChanged.emit(state, "")
    settle(run, app_vm)
    connectivity = find(window, "connectivityLabel")
    assert connectivity.property("text") == app_vm.status.connectivityText
    assert not connectivity.property("truncated")
    bar = find(window, "statusBar")
    # Two lines of text: connection / last sync / "Sync now", then what needs the person.
    assert bar.height() <= 48 + 2 * 24 + 8
    attention = find(window, "attentionLabel")
    assert attention.isVisible()
    assert not attention.property("truncated")
    # The last sync shows whole or not at all ("La…" says nothing); the sheet has it.
    last = find(window, "lastSyncLabel")
    assert last.property("opacity") == (0 if last.property("truncated") else 1)
    check_layout(window)
