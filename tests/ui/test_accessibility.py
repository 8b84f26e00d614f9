"""Accessible names, read the way Orca and AT-SPI automation read them: through Qt's
accessibility interfaces of the real window's items, on every page at phone and desktop size."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from PySide6.QtGui import QAccessible  # only the tests read the accessibility tree

from app.attachments import Attachments
from app.store.store import Store
from tests.ui.conftest import Open, Runner, add_orders, make_conflict, make_dead
from tests.ui.qml_driver import click, find
from ui.main import show_page
from ui.qt import QQuickItem, QQuickWindow, Qt, QTest
from ui.viewmodels.app import PAGES

Role = QAccessible.Role
INTERACTIVE_ROLES = {
    Role.Button,
    Role.CheckBox,
    Role.RadioButton,
    Role.ComboBox,
    Role.EditableText,
    Role.SpinBox,
    Role.Slider,
    Role.ScrollBar,
    Role.ListItem,
    Role.MenuItem,
    Role.PageTab,
    Role.Link,
    Role.ButtonMenu,
    Role.ButtonDropDown,
}
# Qt Quick classes a person can press, type into or choose from, whatever role they claim.
INTERACTIVE_CLASSES = (
    "QQuickAbstractButton",
    "QQuickTextInput",
    "QQuickTextEdit",
    "QQuickComboBox",
)


@pytest.fixture
def seeded(store: Store, tmp_path: Path) -> Store:
    add_orders(store, 5, assignee="Ana")
    make_dead(store, title="Fix gate hinge")
    make_conflict(store)
    # A photo on every work order: the editor's strip is walked with the fields.
    report = tmp_path / "meter-report.txt"
    report.write_text("Reading: 48213 kWh\n", encoding="utf-8")
    for row in store.cache.query(limit=100):
        Attachments(store).attach(row["id"], report)
    return store


def walk(item: QQuickItem) -> Iterator[QQuickItem]:
    yield item
    for child in item.childItems():
        if child is not None:  # PySide gives None for an item type it cannot wrap
            yield from walk(child)


def _inherits(item: QQuickItem, names: tuple[str, ...]) -> bool:
    meta = item.metaObject()
    while meta is not None:
        if meta.className() in names:
            return True
        meta = meta.superClass()
    return False


def _shown(item: QQuickItem) -> bool:
    parent: QQuickItem | None = item
    while parent is not None:
        if not parent.isVisible() or parent.opacity() == 0:
            return False
        parent = parent.parentItem()
    return True


def accessible(item: QQuickItem) -> tuple[Any, str]:
    """(role, name) as a screen reader gets them; (None, "") for an item Qt does not expose."""
    iface = QAccessible.queryAccessibleInterface(item)
    if iface is None or not iface.isValid():
        return None, ""
    return iface.role(), iface.text(QAccessible.Text.Name)


def interactive_items(window: QQuickWindow) -> Iterator[QQuickItem]:
    # From the root item: the window's content and its overlay (menus, sheets, popups).
    for item in walk(window.contentItem()):
        if not _shown(item):
            continue
        role, _ = accessible(item)
        if role in INTERACTIVE_ROLES or _inherits(item, INTERACTIVE_CLASSES):
            yield item


def describe(item: QQuickItem) -> str:
    role, name = accessible(item)
    what = item.objectName() or item.metaObject().className()
    return f"{what} ({role.name}) {name!r}, shows {item.property('text')!r}"


def nameless(window: QQuickWindow) -> list[str]:
    return [describe(i) for i in interactive_items(window) if not accessible(i)[1].strip()]


def names_on_screen(window: QQuickWindow) -> set[str]:
    return {accessible(i)[1] for i in walk(window.contentItem()) if _shown(i)}


@pytest.mark.parametrize("size", [(360, 720), (1280, 800)], ids=["360x720", "1280x800"])
def test_every_interactive_item_of_every_page_has_a_name(
    run: Runner, open_window: Open, seeded: Store, size: tuple[int, int]
) -> None:
    app_vm, window = open_window(*size)
    checked = 0
    for page in PAGES:
        run(show_page(app_vm, page))
        run(app_vm.wait_idle())
        run.pause(0.05)
        assert app_vm.page == page
        items = list(interactive_items(window))
        assert items, f"no interactive item found on {page}"
        checked += len(items)
        assert nameless(window) == [], f"unnamed on the {page} page"
    # The menu and the status bar's detail sheet, open.
    run(show_page(app_vm, "list"))
    click(window, find(window, "menuButton"))
    run.until(lambda: _shown(find(window, "menuSettings")))
    run.pause(0.3)  # the menu's opening transition
    assert nameless(window) == []
    assert accessible(find(window, "menuSettings")) == (Role.MenuItem, "Settings")
    QTest.keyClick(window, Qt.Key.Key_Escape)
    run.until(lambda: not _shown(find(window, "menuSettings")))
    click(window, find(window, "statusWords"))
    run.until(lambda: _shown(find(window, "sheetSyncNowButton")))
    run.pause(0.3)
    assert nameless(window) == []
    assert checked > 40


def test_names_are_the_visible_labels(run: Runner, open_window: Open, seeded: Store) -> None:
    app_vm, window = open_window(360, 720)
    assert {"New", "Menu", "Sync now", "Search", "Filter by status"} <= names_on_screen(window)
    # A row reads as "<title>, <sync state>", the badge as its state.
    row = find(window, "workOrderRow_0")
    assert accessible(row) == (Role.ListItem, "Fix gate hinge, Failed")
    # The status bar's words are exposed as they are shown.
    for name in ("connectivityLabel", "lastSyncLabel", "attentionLabel"):
        label = find(window, name)
        assert accessible(label)[1] == label.property("text") != ""

    run(show_page(app_vm, "editor"))
    run(app_vm.wait_idle())
    fields = {
        "titleField": "Title",
        "siteField": "Site",
        "statusBox": "Status",
        "priorityBox": "Priority",
        "assigneeField": "Assignee",
        "dueDateField": "Due date",
        "notesField": "Notes",
        "saveButton": "Save",
        "backButton": "Back",
    }
    for object_name, label in fields.items():
        assert accessible(find(window, object_name))[1] == label, object_name
        # ... and that label is on screen, above the field (not only in the tree).
        assert _visible_text(window, label), label

    run(show_page(app_vm, "conflict"))
    run(app_vm.wait_idle())
    # Toggles: Qt reports a checkable button as a check box, which AT-SPI reads as such.
    assert accessible(find(window, "mine_notes")) == (Role.CheckBox, "Keep mine")
    assert accessible(find(window, "theirs_notes")) == (Role.CheckBox, "Take theirs")


def test_photos_and_files_are_named_as_shown(run: Runner, open_window: Open, seeded: Store) -> None:
    app_vm, window = open_window(360, 720)
    # The row reads as "<title>, <sync state>"; its attachment line as its words.
    line = find(window, "attachmentCount")
    assert accessible(line) == (Role.StaticText, "1 attachment, 1 file waiting")
    run(show_page(app_vm, "editor"))
    run(app_vm.wait_idle())
    run.until(lambda: _shown(find(window, "attachmentThumb_0")))
    assert accessible(find(window, "addAttachmentButton")) == (Role.Button, "Add photo or file")
    assert accessible(find(window, "attachmentThumb_0")) == (Role.Button, "meter-report.txt")
    assert _visible_text(window, "meter-report.txt")
    click(window, find(window, "attachmentThumb_0"))
    run.until(lambda: _shown(find(window, "viewerCloseButton")))
    run.pause(0.3)  # the view opens over the window
    assert nameless(window) == []
    assert accessible(find(window, "viewerCloseButton")) == (Role.Button, "Close")
    assert accessible(find(window, "viewerRemoveButton")) == (Role.Button, "Remove…")
    click(window, find(window, "viewerRemoveButton"))
    run.until(lambda: _shown(find(window, "confirmRemoveButton")))
    assert accessible(find(window, "confirmRemoveButton")) == (Role.Button, "Remove")
    assert accessible(find(window, "keepAttachmentButton")) == (Role.Button, "Keep it")


def _visible_text(window: QQuickWindow, text: str) -> bool:
    return any(
        _shown(item) and item.property("text") == text
        for item in walk(window.contentItem())
        if item.metaObject().className().startswith(("QQuickText", "FsLabel", "QQuickLabel"))
        or "Label" in item.metaObject().className()
    )
