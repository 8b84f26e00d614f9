"""Loading the QML window: style, palette, and the root view-model handed to Main.qml."""

from __future__ import annotations

import os
from pathlib import Path

from ui.qt import (
    QColor,
    QGuiApplication,
    QPalette,
    QQmlApplicationEngine,
    QQuickStyle,
    QQuickWindow,
    Qt,
    QUrl,
)
from ui.viewmodels.app import AppViewModel

__all__ = ["QML_DIR", "apply_palette", "load_window", "set_style"]

QML_DIR = Path(__file__).resolve().parent / "qml"


def set_style() -> None:
    """Fusion follows the application palette (the system's light or dark colours); a style
    chosen by the platform or QT_QUICK_CONTROLS_STYLE wins. Call before the engine exists."""
    if not os.environ.get("QT_QUICK_CONTROLS_STYLE"):
        QQuickStyle.setStyle("Fusion")


def _dark_palette() -> QPalette:
    palette = QPalette()
    colours = {
        QPalette.ColorRole.Window: "#202124",
        QPalette.ColorRole.WindowText: "#e8eaed",
        QPalette.ColorRole.Base: "#171717",
        QPalette.ColorRole.AlternateBase: "#2a2b2e",
        QPalette.ColorRole.Text: "#e8eaed",
        QPalette.ColorRole.PlaceholderText: "#a0a4aa",
        QPalette.ColorRole.Button: "#303134",
        QPalette.ColorRole.ButtonText: "#e8eaed",
        QPalette.ColorRole.Highlight: "#4c8bf5",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.ToolTipBase: "#303134",
        QPalette.ColorRole.ToolTipText: "#e8eaed",
        QPalette.ColorRole.Mid: "#5f6368",
        QPalette.ColorRole.Light: "#45474a",
        QPalette.ColorRole.Midlight: "#3c3d40",
        QPalette.ColorRole.Dark: "#111111",
        QPalette.ColorRole.Shadow: "#000000",
        QPalette.ColorRole.Link: "#8ab4f8",
    }
    for role, colour in colours.items():
        palette.setColor(role, QColor(colour))
    for role in (
        QPalette.ColorRole.Text,
        QPalette.ColorRole.ButtonText,
        QPalette.ColorRole.WindowText,
    ):
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor("#7d8086"))
    return palette


def apply_palette(app: QGuiApplication, dark: bool | None = None) -> None:
    """Dark when asked, or when the system prefers dark but the platform gave a light palette
    (offscreen, or a desktop without a Qt platform theme).

    WORKAROUND: call it after the QML engine loaded the window: Qt Quick Controls take the
    theme's palette at load and only follow the application palette when it changes later."""
    if dark is None:
        prefers_dark = app.styleHints().colorScheme() == Qt.ColorScheme.Dark
        window = app.palette().color(QPalette.ColorRole.Window)
        dark = prefers_dark and window.lightnessF() > 0.5
    if dark:
        app.setPalette(_dark_palette())


def load_window(
    engine: QQmlApplicationEngine,
    app_vm: AppViewModel,
    width: int,
    height: int,
    *,
    dark: bool | None = None,
) -> QQuickWindow:
    engine.addImportPath(str(QML_DIR))
    engine.setInitialProperties({"app": app_vm, "width": width, "height": height})
    engine.load(QUrl.fromLocalFile(str(QML_DIR / "Main.qml")))
    roots = engine.rootObjects()
    if not roots:
        raise RuntimeError("the QML window failed to load (see the QML errors above)")
    window = roots[0]
    assert isinstance(window, QQuickWindow)
    app = QGuiApplication.instance()
    assert isinstance(app, QGuiApplication)
    apply_palette(app, dark)
    return window
