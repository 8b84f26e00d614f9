"""The editor's photos and files: one work order's attachments with their upload state.

"Add photo or file" asks the page for a file (its FileDialog; inside the Flatpak Qt hands it
to the FileChooser portal) and attaches it through the core (`AttachmentOperations.attach`),
which copies the file into the data dir before it returns: the chosen file is read once, so
the portal's grant is not needed afterwards. The strip repaints in place from the uploader's
`UploadProgress` events and reloads on the OpChanges of attach, retry and remove.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from app.attachments import AttachmentView
from app.states import AttachmentState, Connectivity
from ui.qt import Property, QObject, QUrl, Signal, Slot, connect
from ui.services import Services
from ui.viewmodels.attachment_words import (
    UploadWords,
    is_image,
    percent,
    state_in_words,
)
from ui.viewmodels.base import ListViewModel, Refused, notified
from ui.wording import size_in_words

__all__ = ["AttachmentListModel"]


def _local_file(url_or_path: str) -> Path:
    url = QUrl(url_or_path)
    return Path(url.toLocalFile() if url.isLocalFile() else url_or_path)


class AttachmentListModel(ListViewModel[AttachmentView]):
    """Attachments of the work order open in the editor, oldest first.

    Signals:
        changed()  — the work order, the count, busy or the viewed attachment changed
        fileWanted()  — the page should ask which file to attach (its FileDialog)
    """

    changed = Signal()
    fileWanted = Signal()
    ROLE_NAMES = (
        "attachmentId",
        "filename",
        "kindText",
        "isImage",
        "imageUrl",
        "sizeText",
        "state",
        "stateText",
        "progress",
        "canRetry",
    )

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._services = services
        self._entity_id = ""
        self._viewed = ""  # the attachment shown full screen ("" none)
        self._busy = False
        self._generation = 0
        # A colleague's photo is not on this device: its thumbnail, fetched once on demand
        # (attachment id -> file URL; "" while asked).
        self._thumbnails: dict[str, str] = {}
        bridge = services.bridge
        connect(bridge.opChanges, self.on_bridge_op_changes)
        connect(bridge.recordsChanged, self.on_bridge_records_changed)
        connect(bridge.uploadProgress, self.on_bridge_upload_progress)
        connect(bridge.connectivityChanged, self.on_bridge_connectivity_changed)

    # -- rows -------------------------------------------------------------------------------

    def _value(self, row: AttachmentView, name: str) -> Any:
        words = self._words(row)
        image = is_image(row.content_type)
        match name:
            case "attachmentId":
                return row.id
            case "filename" | "title":
                return row.filename
            case "kindText":
                return "Photo" if image else "File"
            case "isImage":
                return image
            case "imageUrl":
                local = row.local_path
                if image and local:
                    return QUrl.fromLocalFile(str(local)).toString()
                return self._thumbnails.get(row.id, "")
            case "sizeText":
                return size_in_words(row.size)
            case "state":
                return "waiting" if words.waits_for_unmetered else words.state
            case "stateText":
                return state_in_words(words)
            case "progress":  # what the server has, also while the upload waits for a link
                uploading = (
                    words.state == AttachmentState.UPLOADING and not words.waits_for_unmetered
                )
                return percent(words.offset, words.size) / 100 if uploading else -1.0
            case "canRetry":
                return row.state is AttachmentState.FAILED
        raise KeyError(name)

    def _words(self, row: AttachmentView) -> UploadWords:
        # Uploads wait while the engine is paused on a metered link by the person's setting
        # (the status bar says "Paused"): the photo says it waits for Wi-Fi, as a large one
        # not yet started does under that setting. One going up on Wi-Fi says so.
        unsent = row.state in (AttachmentState.WAITING, AttachmentState.UPLOADING)
        connectivity = self._services.bridge.connectivity
        large_waiting = row.waits_for_unmetered and row.state is AttachmentState.WAITING
        return UploadWords(
            state=str(row.state),
            offset=row.offset,
            size=row.size,
            reason=row.reason or "",
            waits_for_unmetered=unsent and (large_waiting or connectivity == Connectivity.PAUSED),
            link_down=unsent and connectivity in (Connectivity.OFFLINE, Connectivity.UNREACHABLE),
        )

    # -- the work order ---------------------------------------------------------------------

    def show(self, entity_id: str) -> None:
        """Follow the editor: the attachments of ``entity_id`` ("" for a new, unsaved form)."""
        if entity_id == self._entity_id:
            return
        self._generation += 1
        self._entity_id = entity_id
        self._viewed = ""
        self.beginResetModel()
        self._rows = []
        self.endResetModel()
        self.changed.emit()
        self.reload()

    @Slot()
    def reload(self) -> None:
        if self._entity_id:
            self._tasks.start(self._reload(self._entity_id, self._generation), "attachments")

    async def _reload(self, entity_id: str, generation: int) -> None:
        rows = await self._services.attachments.list_for(entity_id)
        if generation != self._generation:
            return  # the person opened another work order meanwhile
        if [r.id for r in rows] == [r.id for r in self._rows]:
            self._rows = list(rows)
            self.repaint()
        else:
            self.beginResetModel()
            self._rows = list(rows)
            self.endResetModel()
        if self._viewed and self._viewed not in {r.id for r in rows}:
            self._viewed = ""
        self.changed.emit()
        self._fetch_thumbnails(generation)

    def _fetch_thumbnails(self, generation: int) -> None:
        engine = self._services.engine
        if engine is None:
            return
        for row in self._rows:
            wanted = row.content_type.startswith("image/") and row.local_path is None
            if wanted and row.id not in self._thumbnails:
                self._thumbnails[row.id] = ""
                self._tasks.start(self._thumbnail(engine, row.id, generation), "thumbnail")

    async def _thumbnail(self, engine: Any, attachment_id: str, generation: int) -> None:
        path = await engine.uploader.thumbnail(attachment_id)
        if path is None:
            del self._thumbnails[attachment_id]  # offline now: asked again on the next reload
            return
        self._thumbnails[attachment_id] = QUrl.fromLocalFile(str(path)).toString()
        if generation == self._generation:
            rows = [i for i, r in enumerate(self._rows) if r.id == attachment_id]
            self.repaint(rows, ["imageUrl"])
            self.changed.emit()

    # -- core events ------------------------------------------------------------------------

    def on_bridge_op_changes(self, changes: dict[str, Any]) -> None:
        if self._entity_id and self._entity_id in changes["entity_ids"]:
            self.reload()

    def on_bridge_records_changed(self, entity_ids: list[str]) -> None:
        """A pull changed this work order or its attachments (a colleague's photo or its
        removal names the work order, though its version stays); an empty list means
        anything may have changed."""
        if self._entity_id and (not entity_ids or self._entity_id in entity_ids):
            self.reload()

    def on_bridge_upload_progress(self, change: dict[str, Any]) -> None:
        """One upload moved: its tile repaints in place; an unknown one of this work order
        (attached by another window, or a colleague's) reloads the strip."""
        if not self._entity_id or change["entity_id"] != self._entity_id:
            return
        i = next((i for i, r in enumerate(self._rows) if r.id == change["attachment_id"]), -1)
        if i < 0:
            self.reload()
            return
        self._rows[i] = replace(
            self._rows[i],
            state=AttachmentState(change["state"]),
            offset=int(change["offset"]),
            reason=change["reason"] or None,
        )
        self.repaint([i])
        if change["attachment_id"] == self._viewed:
            self.changed.emit()

    def on_bridge_connectivity_changed(self, state: str, reason: str) -> None:
        if self._rows:  # "Waiting for Wi-Fi" follows the engine's pause
            self.repaint()
            self.changed.emit()

    # -- properties -------------------------------------------------------------------------

    entityId = notified(str, "_entity_id", changed)

    @Property(int, notify=changed)
    def count(self) -> int:
        return len(self._rows)

    @Property(bool, notify=changed)
    def canAdd(self) -> bool:
        return bool(self._entity_id) and not self._busy

    @Property(str, notify=changed)
    def heading(self) -> str:
        return f"Photos and files ({len(self._rows)})" if self._rows else "Photos and files"

    @Property(str, notify=changed)
    def hint(self) -> str:
        if not self._entity_id:
            return "Save the work order first, then add photos and files."
        if self._busy:
            return "Adding the file…"
        if not self._rows:
            return "No photos or files yet. They stay on this device until the server has them."
        return ""

    @Property(str, constant=True)
    def folderUrl(self) -> str:
        """Where the dialog opens: Pictures if there is one, else the home folder."""
        home = Path.home()
        folder = home / "Pictures" if (home / "Pictures").is_dir() else home
        return QUrl.fromLocalFile(str(folder)).toString()

    # -- actions ----------------------------------------------------------------------------

    @Slot()
    def chooseFile(self) -> None:
        if self.canAdd:
            self.fileWanted.emit()

    @Slot(str)
    def attach(self, file: str) -> None:
        """Attach ``file`` (a file:// URL from the dialog, or a path) to the open work order."""
        if not self._entity_id:
            self.message.emit("Save the work order first, then add photos and files.")
            return
        self._busy = True
        self.changed.emit()
        self._tasks.start(self._attach(self._entity_id, _local_file(file)), "attach")

    async def _attach(self, entity_id: str, path: Path) -> None:
        try:  # refused: not a file, unreadable, too large, storage full
            added = await self._carry_out(
                self._services.attachments.attach(entity_id, path), "Not added"
            )
            if not isinstance(added, Refused):
                # Not "Uploading…": one failed request does not yet make the engine say the
                # server is unreachable, so the link's state here may be a moment old. The
                # tile says what the upload does; this says what is already true.
                self.message.emit(
                    f"Added {added.filename}. It stays on this device until the server has it."
                )
        finally:
            self._busy = False
            self.changed.emit()
        if entity_id == self._entity_id:
            await self._reload(entity_id, self._generation)

    @Slot(str)
    def retry(self, attachment_id: str) -> None:
        self._tasks.start(self._retry(attachment_id), "attachment-retry")

    async def _retry(self, attachment_id: str) -> None:
        retried = await self._carry_out(
            self._services.attachments.retry_upload(attachment_id), "Not retried"
        )
        if not isinstance(retried, Refused):
            self.message.emit("Sending it again.")

    @Slot(str)
    def remove(self, attachment_id: str) -> None:
        self._tasks.start(self._remove(attachment_id), "detach")

    async def _remove(self, attachment_id: str) -> None:
        removed = await self._carry_out(
            self._services.attachments.detach(attachment_id), "Not removed"
        )
        if isinstance(removed, Refused):
            return
        if self._viewed == attachment_id:
            self.closeViewer()
        self.message.emit(f"Removed {removed.filename}.")

    # -- full-screen view -------------------------------------------------------------------

    @Slot(str)
    def openViewer(self, attachment_id: str) -> None:
        if any(r.id == attachment_id for r in self._rows):
            self._viewed = attachment_id
            self.changed.emit()

    @Slot()
    def closeViewer(self) -> None:
        if self._viewed:
            self._viewed = ""
            self.changed.emit()

    @Property(bool, notify=changed)
    def viewerOpen(self) -> bool:
        return bool(self._viewed)

    @Property("QVariantMap", notify=changed)
    def viewed(self) -> dict[str, Any]:
        i = next((i for i, r in enumerate(self._rows) if r.id == self._viewed), -1)
        return self.get(i) if i >= 0 else {}
