"""Loading the QML window: style, palette, and the root view-model handed to Main.qml."""

from __future__ import annotations

import os
import site
import sys
import sysconfig
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

__all__ = ["QML_DIR", "apply_palette", "icon_dir", "load_window", "set_style"]

QML_DIR = Path(__file__).resolve().parent / "qml"


def set_style() -> None:
    """The Basic style, drawn by our own controls (the Fieldsync.Controls module,
    ui/qml/Fieldsync/Controls/, with its Theme singleton): the lightest Qt Quick style, made to
    be customised, and it follows the application palette (docs/look.md says why not Material).
    QT_QUICK_CONTROLS_STYLE still wins. Call before the engine exists."""
    if not os.environ.get("QT_QUICK_CONTROLS_STYLE"):
        QQuickStyle.setStyle("Basic")


def icon_dir() -> Path:
    """resources/icons in a checkout, or share/fieldsync/icons where pip installed them (the
    environment's prefix, a --user install's base, or a Flatpak's /app)."""
    prefixes = [Path(sys.prefix), Path(sysconfig.get_path("data")), Path(site.USER_BASE or "")]
    candidates = [Path(__file__).resolve().parents[1] / "resources" / "icons"]
    candidates += [p / "share" / "fieldsync" / "icons" for p in [*prefixes, Path("/app")]]
    for candidate in candidates:
        if (candidate / "sync-synced.svg").is_file():
            return candidate
    raise RuntimeError("the sync-state icons are missing (resources/icons); reinstall Fieldsync")


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


def _high_contrast_palette(dark: bool) -> QPalette:
    """Pure black on white (or white on black), the accent kept apart by hue alone."""
    ink, paper = ("#ffffff", "#000000") if dark else ("#000000", "#ffffff")
    accent = "#ffd400" if dark else "#0030c0"
    palette = QPalette()
    for role in (
        QPalette.ColorRole.Window,
        QPalette.ColorRole.Base,
        QPalette.ColorRole.AlternateBase,
        QPalette.ColorRole.Button,
        QPalette.ColorRole.ToolTipBase,
        QPalette.ColorRole.Light,
        QPalette.ColorRole.Midlight,
    ):
        palette.setColor(role, QColor(paper))
    for role in (
        QPalette.ColorRole.WindowText,
        QPalette.ColorRole.Text,
        QPalette.ColorRole.ButtonText,
        QPalette.ColorRole.ToolTipText,
        QPalette.ColorRole.PlaceholderText,
        QPalette.ColorRole.Mid,
        QPalette.ColorRole.Dark,
        QPalette.ColorRole.Shadow,
    ):
        palette.setColor(role, QColor(ink))
    palette.setColor(QPalette.ColorRole.Highlight, QColor(accent))
    palette.setColor(QPalette.ColorRole.HighlightedText, QColor(paper))
    palette.setColor(QPalette.ColorRole.Link, QColor(accent))
    return palette


def apply_palette(
    app: QGuiApplication, dark: bool | None = None, *, high_contrast: bool = False
) -> None:
    """Dark when asked, or when the system prefers dark but the platform gave a light palette
    (offscreen, or a desktop without a Qt platform theme).

    WORKAROUND: call it after the QML engine loaded the window: Qt Quick Controls take the
    theme's palette at load and only follow the application palette when it changes later."""
    if dark is None:
        prefers_dark = app.styleHints().colorScheme() == Qt.ColorScheme.Dark
        window = app.palette().color(QPalette.ColorRole.Window)
        dark = prefers_dark and window.lightnessF() > 0.5
    if high_contrast:
        app.setPalette(_high_contrast_palette(bool(dark)))
    elif dark:
        app.setPalette(_dark_palette())


def load_window(
    engine: QQmlApplicationEngine,
    app_vm: AppViewModel,
    width: int,
    height: int,
    *,
    dark: bool | None = None,
    high_contrast: bool = False,
) -> QQuickWindow:
    # Main.qml imports the Fieldsync.Controls, .Components and .Pages modules from here.
    engine.addImportPath(str(QML_DIR))
    # Read by Theme.qml; a trailing slash so QML can append a file name.
    engine.rootContext().setContextProperty(
        "fieldsyncIconDir", QUrl.fromLocalFile(str(icon_dir()) + "/").toString()
    )
    engine.setInitialProperties({"app": app_vm, "width": width, "height": height})
    engine.load(QUrl.fromLocalFile(str(QML_DIR / "Main.qml")))
    roots = engine.rootObjects()
    if not roots:
        raise RuntimeError("the QML window failed to load (see the QML errors above)")
    window = roots[0]
    assert isinstance(window, QQuickWindow)
    app = QGuiApplication.instance()
    assert isinstance(app, QGuiApplication)
    apply_palette(app, dark, high_contrast=high_contrast)
    return window
