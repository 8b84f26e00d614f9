"""Touch input the field expects (issue 24): the due date from a calendar, keyboards that
match their fields, and a list row whose secondary line wraps at 360 px instead of "Team so…".
Assertions read what a real window shows at phone size."""

from __future__ import annotations

import datetime
from typing import Any

from app.store.store import Store
from tests.ui.app_driver import settle
from tests.ui.conftest import Open, Runner, add_orders
from tests.ui.qml_driver import check_phone_layout, click, find, shown_texts, shows
from ui.qt import Qt


def picker(window: Any) -> Any:
    return find(window, "dueDateFieldPicker")


def test_the_due_date_is_picked_from_a_calendar_and_cleared(
    run: Runner, open_window: Open, store: Store
) -> None:
    add_orders(store, 1)
    app_vm, window = open_window(360, 720)
    click(window, find(window, "workOrderRow_0"))
    run.until(lambda: app_vm.editor.loaded)
    field = find(window, "dueDateField")
    assert field.property("text") == "No date"
    assert field.metaObject().className().startswith("FsButton")  # not a text to type into

    click(window, field)
    run.until(lambda: picker(window).property("opened"))
    today = datetime.date.today()
    assert shows(window, today.strftime("%B %Y"))
    check_phone_layout(window)  # seven days of 48 px targets fit a phone's width
    click(window, find(window, "nextMonthButton"))
    after = (today.replace(day=1) + datetime.timedelta(days=32)).replace(day=3)
    run.until(lambda: shows(window, after.strftime("%B %Y")))
    click(window, find(window, f"day_{after.isoformat()}"))
    run.until(lambda: not picker(window).property("opened"))
    settle(run, app_vm)
    assert app_vm.editor.fields["due_date"] == after.isoformat()
    assert field.property("text") == after.strftime("%a %-d %b %Y")
    assert shows(window, after.strftime("%a %-d %b %Y"))

    # Opened again, it starts on the chosen month; "Clear" empties the date.
    click(window, field)
    run.until(lambda: picker(window).property("opened"))
    assert shows(window, after.strftime("%B %Y"))
    click(window, find(window, "closeDatePickerButton"))
    run.until(lambda: not picker(window).property("opened"))
    click(window, find(window, "dueDateFieldClear"))
    settle(run, app_vm)
    assert app_vm.editor.fields["due_date"] == ""
    assert field.property("text") == "No date"


def test_each_field_asks_for_the_keyboard_it_needs(
    run: Runner, open_window: Open, store: Store
) -> None:
    app_vm, window = open_window(360, 720)
    click(window, find(window, "newButton"))
    settle(run, app_vm)
    hints = Qt.InputMethodHint
    lower = hints.ImhNoAutoUppercase | hints.ImhPreferLowercase | hints.ImhNoPredictiveText
    for name in ("assigneeField", "teamField"):
        assert find(window, name).property("inputMethodHints") == lower, name
    assert find(window, "titleField").property("inputMethodHints") == hints.ImhNone


def test_a_rows_secondary_lines_wrap_at_phone_width(
    run: Runner, open_window: Open, store: Store
) -> None:
    add_orders(
        store,
        1,
        site="Pumping station 14, north reservoir access road",
        assignee="ana.rodriguez",
        team="south-east maintenance",
        due_date="2026-12-03",
    )
    app_vm, window = open_window(360, 720)
    settle(run, app_vm)
    line = "Open · Pumping station 14, north reservoir access road · ana.rodriguez · "
    line += "Team south-east maintenance · due 2026-12-03"
    assert (line, False) in shown_texts(window)  # in full, not "Team so…"
    check_phone_layout(window)
