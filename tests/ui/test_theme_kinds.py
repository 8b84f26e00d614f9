"""Every badge kind the core names (`app.states.BadgeKind`) has a colour and an icon of its
own in the Theme QML draws badges with: a kind added in one place and not the other would be
drawn grey with the pending icon, telling the person something untrue.

The Theme is evaluated by a real QML engine, not read as text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from PySide6.QtCore import QObject, QUrl
from PySide6.QtQml import QQmlComponent, QQmlEngine

from app.states import BadgeKind
from ui.window import QML_DIR

PROBE = b"""
import QtQuick
import Fieldsync.Controls
QtObject {
    property var kinds: []
    readonly property var colours: kinds.map(kind => Theme.syncColor(kind).toString())
    readonly property var icons: kinds.map(kind => Theme.syncIcon(kind))
    readonly property string unknownColour: Theme.syncColor("no such kind").toString()
}
"""


@pytest.fixture
def theme(qapp: object) -> Iterator[QObject]:
    engine = QQmlEngine()
    engine.addImportPath(str(QML_DIR))
    engine.rootContext().setContextProperty("fieldsyncIconDir", "icons/")
    component = QQmlComponent(engine)
    component.setData(PROBE, QUrl.fromLocalFile(str(QML_DIR / "probe.qml")))
    probe = component.create()
    assert probe is not None, component.errorString()
    probe.setProperty("kinds", [str(kind) for kind in BadgeKind])
    yield probe
    del probe
    engine.deleteLater()


def test_every_badge_kind_has_a_colour_of_its_own(theme: QObject) -> None:
    colours = theme.property("colours").toVariant()
    assert len(colours) == len(BadgeKind)
    assert theme.property("unknownColour") not in colours
    assert len(set(colours)) == len(colours), dict(zip(BadgeKind, colours, strict=True))


def test_every_badge_kind_has_an_icon_that_ships(theme: QObject) -> None:
    icons = theme.property("icons").toVariant()
    assert icons == [f"icons/sync-{kind}.svg" for kind in BadgeKind]
    shipped = Path(__file__).resolve().parents[2] / "resources" / "icons"
    assert all((shipped / Path(icon).name).is_file() for icon in icons)
