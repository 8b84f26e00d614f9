"""Export my pending data: every unsent change saved as one JSON file the person chooses.

A button (on the diagnostics page, or in the status bar's detail, which goes there) calls
`chooseFile`; the page's FileDialog opens on `fileWanted` and hands the chosen file to
`exportTo`; the core operation `Operations.export_pending` writes it.
"""

from __future__ import annotations

import time
from pathlib import Path

from app.store.errors import StoreError
from ui.qt import Property, QObject, QUrl, Signal, Slot
from ui.services import Services
from ui.viewmodels.base import ViewModel, notified

__all__ = ["PendingExportViewModel", "export_in_words"]


def export_in_words(count: int, failed: int, path: Path) -> str:
    if count == 0:
        return f"Nothing is waiting to be sent; saved an empty list to {path}"
    noun = "change" if count == 1 else "changes"
    extra = f" ({failed} failed)" if failed else ""
    return f"Saved {count} unsent {noun}{extra} to {path}"


class PendingExportViewModel(ViewModel):
    """Signals:
    changed()  — busy or the last result changed
    message(str)  — the result, for a toast (from ViewModel)
    fileWanted()  — the window should ask where to save (its FileDialog)
    """

    changed = Signal()
    fileWanted = Signal()

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._busy = False
        self._last = ""

    @Property(str, notify=changed)
    def suggestedName(self) -> str:
        return f"fieldsync-pending-{time.strftime('%Y%m%d-%H%M')}.json"

    @Property(str, constant=True)
    def folderUrl(self) -> str:
        """Where the dialog opens: Documents if there is one, else the home folder."""
        home = Path.home()
        folder = home / "Documents" if (home / "Documents").is_dir() else home
        return QUrl.fromLocalFile(str(folder)).toString()

    busy = notified(bool, "_busy", changed)
    lastResult = notified(str, "_last", changed)

    @Slot()
    def chooseFile(self) -> None:
        if not self._busy:
            self.fileWanted.emit()

    @Slot(str)
    def exportTo(self, file: str) -> None:
        """Write to ``file``: a file:// URL from the dialog, or a plain path."""
        url = QUrl(file)
        path = Path(url.toLocalFile() if url.isLocalFile() else file)
        if not path.name:
            self.message.emit("Choose a file name to export to.")
            return
        self._busy = True
        self.changed.emit()
        self._tasks.start(self._export(path), "export-pending")

    async def _export(self, path: Path) -> None:
        try:
            summary = await self._services.operations.export_pending(path)
        except StoreError as exc:
            self._last = f"Not exported: {exc}"
        else:
            self._last = export_in_words(summary.count, summary.failed, summary.path)
        finally:
            self._busy = False
            self.changed.emit()
        self.message.emit(self._last)
