"""Drive the real QML window in tests: find items by objectName, click, type, check layout."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ui.qt import QObject, QQuickItem, QQuickWindow, Qt, QTest


def find(window: QQuickWindow, name: str) -> Any:
    """The visible item (or any object) called `name`; fails the test when there is none."""
    matches = [item for item in walk(window.contentItem()) if item.objectName() == name]
    visible = [item for item in matches if item.isVisible()]
    if visible:
        return visible[0]
    found = window.findChild(QObject, name)
    assert found is not None, f"no item named {name!r}"
    return found


def walk(item: QQuickItem) -> Iterator[QQuickItem]:
    yield item
    for child in item.childItems():
        yield from walk(child)


def scroll_into_view(item: QQuickItem) -> None:
    """Scroll the enclosing Flickable (if any) so a person could see and tap `item`."""
    parent = item.parentItem()
    while parent is not None and "Flickable" not in parent.metaObject().className():
        parent = parent.parentItem()
    if parent is None:
        return
    content = parent.property("contentItem")
    top = item.mapToItem(content, item.boundingRect().topLeft()).y()
    view = parent.height()
    y = float(parent.property("contentY"))
    if top < y or top + item.height() > y + view:
        most = max(0.0, float(parent.property("contentHeight")) - view)
        parent.setProperty("contentY", min(most, max(0.0, top - view / 3)))


def polish_ancestors(item: QQuickItem) -> None:
    """Lay out what encloses `item` now. Layouts position their children lazily, at the next
    frame's polish; a tap computed before that frame would land where the item was before
    (a person never taps a page that has not been drawn)."""
    chain = []
    parent: QQuickItem | None = item
    while parent is not None:
        chain.append(parent)
        parent = parent.parentItem()
    for ancestor in reversed(chain):
        ancestor.ensurePolished()


def click(window: QQuickWindow, item: QQuickItem) -> None:
    assert item.isVisible(), f"{item.objectName()} is not visible"
    assert item.isEnabled(), f"{item.objectName()} is disabled"
    polish_ancestors(item)
    scroll_into_view(item)
    centre = item.mapToScene(item.boundingRect().center()).toPoint()
    QTest.mouseClick(window, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, centre)


def type_into(window: QQuickWindow, item: QQuickItem, text: str, *, replace: bool = True) -> None:
    click(window, item)
    item.forceActiveFocus()
    if replace:
        QTest.keyClick(window, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
        QTest.keyClick(window, Qt.Key.Key_Backspace)
    for char in text:  # QTest.keyClicks takes only widgets
        QTest.keyClick(window, char)


def overflowing(window: QQuickWindow) -> list[str]:
    """Visible items that stick out past the window's right edge (horizontal scrolling)."""
    limit = window.width() + 0.5
    bad = []
    for item in walk(window.contentItem()):
        if not item.isVisible() or item.width() <= 0 or not _shown(item):
            continue
        # The item's own left edge: a centred Text's boundingRect() starts where its text does.
        left = item.mapToScene(item.boundingRect().topLeft()).x() - item.boundingRect().x()
        width = item.width()
        if item.metaObject().className().startswith("QQuickText"):
            # Elided or wrapped text lays out within its width; anything else may spill over.
            width = max(width, float(item.property("contentWidth")))
        if left + width > limit:
            name = item.objectName() or item.metaObject().className()
            text = item.property("text") if item.property("text") is not None else ""
            bad.append(f"{name} {text!r}: right edge {left + width:.0f} > {window.width()}")
    return bad


def _shown(item: QQuickItem) -> bool:
    """False inside a clipped, scrolled-away area (a list row below the fold is fine)."""
    parent = item.parentItem()
    while parent is not None:
        if not parent.isVisible() or parent.opacity() == 0:
            return False
        parent = parent.parentItem()
    return True


def too_small_targets(window: QQuickWindow) -> list[str]:
    """Buttons, fields and boxes shorter than 48 px (touch targets)."""
    kinds = ("Button", "TextField", "ComboBox", "ToolButton", "CheckBox")
    small = []
    for item in walk(window.contentItem()):
        cls = item.metaObject().className()
        if item.isVisible() and any(k in cls for k in kinds) and item.height() < 47.5:
            small.append(f"{item.objectName() or cls}: {item.height():.0f} px")
    return small


def screenshot(window: QQuickWindow, path: Path) -> None:
    image = window.grabWindow()
    assert not image.isNull()
    assert image.save(str(path)), f"could not write {path}"


def check_phone_layout(window: QQuickWindow) -> None:
    """At phone width: nothing sticks out past the right edge, every target is ≥ 48 px."""
    if window.width() <= 400:
        assert overflowing(window) == []
        assert too_small_targets(window) == []


def shown_texts(window: QQuickWindow) -> list[tuple[str, bool]]:
    """(text, truncated) of every text a person can see now: its item and every ancestor
    visible and not transparent, and inside the window. A hidden label is not in it."""
    bounds = (0.0, 0.0, float(window.width()), float(window.height()))
    found = []
    for item in walk(window.contentItem()):
        meta = item.metaObject()
        # WORKAROUND: reading a property an item lacks returns None, and PySide6 6.12 drops
        # a reference to None each time (CPython aborts after a few thousand): ask first.
        if meta.indexOfProperty("text") < 0 or not item.isVisible():
            continue
        text = item.property("text")
        if not isinstance(text, str) or not text:
            continue
        if item.opacity() == 0 or not _shown(item) or item.width() <= 0:
            continue
        rect = item.mapRectToScene(item.boundingRect())
        if rect.right() < bounds[0] or rect.left() > bounds[2]:
            continue
        if rect.bottom() < bounds[1] or rect.top() > bounds[3]:
            continue
        truncated = meta.indexOfProperty("truncated") >= 0 and bool(item.property("truncated"))
        found.append((text, truncated))
    return found


def texts_shown(window: QQuickWindow) -> set[str]:
    """Every text a person can see now, truncated or not (`shown_texts` without the flag)."""
    return {text for text, _ in shown_texts(window)}


def shows(window: QQuickWindow, words: str) -> bool:
    """Does a visible, untruncated text on screen contain `words`?"""
    return any(words in text and not truncated for text, truncated in shown_texts(window))
