"""The global exception hook: a bug is logged and shown in a dialog, never a silent exit.

`install()` replaces `sys.excepthook` (uncaught exceptions in slots and callbacks land there
under PySide6) and the asyncio loop's exception handler (a failed task). `report()` is the one
way view-models hand over an unexpected exception. The dialog shows the traceback, never
credentials: tokens are not part of any exception message (the credentials module's rule).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import traceback
from types import TracebackType
from typing import Any

from ui.qt import QApplication, QMessageBox

__all__ = ["install", "report"]

log = logging.getLogger("fieldsync.crash")
_showing = False


def report(exc: BaseException) -> None:
    """Hand an unexpected exception to whatever `sys.excepthook` is installed."""
    sys.excepthook(type(exc), exc, exc.__traceback__)


def _excepthook(
    exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    if issubclass(exc_type, KeyboardInterrupt):
        QApplication.quit()
        return
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    log.critical("unexpected error\n%s", text)
    show_dialog(text)


def show_dialog(details: str) -> None:
    """The crash dialog, modal; "Close" quits. At most one at a time."""
    global _showing
    app = QApplication.instance()
    if app is None or _showing or not isinstance(app, QApplication):
        return
    _showing = True
    try:
        box = QMessageBox(
            QMessageBox.Icon.Critical,
            "Fieldsync ran into a bug",
            "Something unexpected went wrong. Your saved edits are safe on this device.\n\n"
            "You can keep working, or quit and start Fieldsync again. Please report this, "
            "with the details below.",
            QMessageBox.StandardButton.Ok | QMessageBox.StandardButton.Close,
        )
        box.setDetailedText(details)
        box.setDefaultButton(QMessageBox.StandardButton.Ok)
        if box.exec() == QMessageBox.StandardButton.Close:
            QApplication.quit()
    finally:
        _showing = False


def _loop_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    exc = context.get("exception")
    if isinstance(exc, BaseException):
        _excepthook(type(exc), exc, exc.__traceback__)
    else:
        log.error("asyncio: %s", context.get("message"))


def install(loop: asyncio.AbstractEventLoop | None = None) -> None:
    sys.excepthook = _excepthook
    if loop is not None:
        loop.set_exception_handler(_loop_exception_handler)
