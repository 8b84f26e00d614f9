"""The work-order editor: validates with the server's rules, saves to the local queue.

While the editor shows a work order, the core keeps it on the device
(`Operations.hold_for_editing`): a pull saying it is no longer assigned to this person marks it
"No longer assigned to you" instead of removing it under the person's typing, and a save still
queues the edit. It leaves when the editor shows something else or closes, once nothing of it
is unsent.

Save writes the cache and enqueues the job in one transaction (the core operation
`Operations.save_edit`), offline or not; the row's badge turns "pending" at once because the
operation's OpChanges names the record. Validation uses the mutation contract
(`app.mutations`), as the store and the server do.

The queue state of the work order (badge, sync line, countdown) lives in
`ui.viewmodels.editor_sync`.

What the person types is kept as a draft through a kill (`ui.viewmodels.drafts`): written
after each pause in typing, removed with Save (in its transaction) or Undo/Discard, and
restored, merged over the record as it is now, when the form opens again.
"""

from __future__ import annotations

from typing import Any

from app.store.deadletters import EntityJobState
from app.store.drafts import NEW_FORM, Draft, read_draft
from app.store.errors import InvalidEditError, StoreError
from app.store.store import Store
from ui.crash import report
from ui.qt import Property, QObject, Signal, Slot, connect
from ui.services import Services
from ui.viewmodels.base import notified
from ui.viewmodels.drafts import DraftKeeper
from ui.viewmodels.editor_sync import EditorSyncViewModel, job_state
from ui.viewmodels.form import BLANK, FIELDS, as_form, check_form, follow_server
from ui.wording import FIELD_LABELS, PRIORITY_WORDS, STATUS_WORDS, field_label

__all__ = ["FIELDS", "EditorViewModel"]


def _load(store: Store, entity_id: str) -> tuple[dict[str, Any] | None, EntityJobState | None]:
    return store.work_order(entity_id), job_state(store, entity_id)


def _open(
    store: Store, entity_id: str
) -> tuple[dict[str, Any] | None, EntityJobState | None, Draft | None]:
    return (*_load(store, entity_id), read_draft(store, entity_id))


class EditorViewModel(EditorSyncViewModel):
    """One work order being created or edited.

    Signals:
        changed()  — fields, errors or state changed
        saved(str entity_id)  — written to the local queue and cache
        restoredNew()  — a new work order's typing was restored (the app shows the editor)
        message(str)  — something to tell the person once (from ViewModel)
    """

    changed = Signal()
    saved = Signal(str)
    restoredNew = Signal()

    def __init__(self, services: Services, parent: QObject | None = None) -> None:
        # A failed load or save is a bug here (the saves tell StoreErrors themselves), and
        # it must not leave the form "saving".
        super().__init__(
            services, parent, on_error=self._on_task_error, conditions_as_messages=False
        )
        self._original: dict[str, str] = dict(BLANK)
        self._form: dict[str, str] = dict(BLANK)
        self._server_version: int | None = None
        self._errors: dict[str, str] = {}
        self._show_all_errors = False
        self._touched: set[str] = set()
        self._saving = False
        self._loaded = False
        # The work order the core keeps on the device for this form ("": none).
        self._held = ""
        # Counts the forms shown (each work order opened, each new form). A load or a save
        # that finishes after the person moved on must not put another record on screen, and
        # two new forms in a row are different forms.
        self._generation = 0
        connect(services.bridge.opChanges, self.on_bridge_op_changes)
        self._drafts = DraftKeeper(services, self._draft_snapshot, self)
        connect(self._drafts.changed, self.changed.emit)
        connect(self._drafts.discardRequested, self.revert)
        connect(self._drafts.chosen, self.setField)
        connect(self._drafts.message, self.message.emit)

    # -- slots ------------------------------------------------------------------------------

    def _blank(self, entity_id: str, *, loaded: bool) -> None:
        """An empty form for ``entity_id`` ("" for a new one): nothing of another record."""
        self._generation += 1
        if self._held and self._held != entity_id:
            self._let_go()
        self._drafts.forget()
        self._entity_id = entity_id
        self._original = dict(BLANK)
        self._form = dict(BLANK)
        self._server_version = None
        self._state = None
        self._reset_validation()
        self._loaded = loaded
        self.changed.emit()

    @Slot()
    def newRecord(self) -> None:
        self._blank("", loaded=True)
        self._tasks.start(self._restore_new(self._generation), "editor-restore-new")

    async def _restore_new(self, generation: int) -> bool:
        """A new work order's typing kept from an earlier run comes back on the new form."""
        draft = await self._services.operations.read_draft(NEW_FORM)
        if draft is None or generation != self._generation or self._entity_id or self.dirty:
            return False
        self._form = self._drafts.restore(draft, dict(BLANK))
        self._touched = set(draft.typed)
        self._validate()
        self.changed.emit()
        return True

    @Slot(str)
    def load(self, entity_id: str) -> None:
        """Open a work order: nothing of the previous one stays on screen, and nothing can be
        saved until this one has been read."""
        self._blank(entity_id, loaded=False)
        self._tasks.start(self._load(entity_id, self._generation), "editor-load")

    @Slot()
    def close(self) -> None:
        """The editor page closed: an empty form, and the core lets go of the work order."""
        self._blank("", loaded=True)

    def start(self) -> None:
        """The app starts: what an earlier run's editor held goes, but for its drafts; a
        new work order's draft opens the editor on it."""
        self._tasks.start(self._services.operations.release_editing(), "editor-release-all")
        self._tasks.start(self._announce_new(self._generation), "editor-restore-new")

    async def _announce_new(self, generation: int) -> None:
        if await self._restore_new(generation):
            self.restoredNew.emit()

    async def wait_idle(self) -> None:
        await super().wait_idle()
        await self._drafts.wait_idle()

    async def aclose(self) -> None:
        await self._drafts.aclose()
        await super().aclose()
        if self._held:
            held, self._held = self._held, ""
            await self._services.operations.release_editing(held)

    async def _hold(self, entity_id: str) -> bool:
        return await self._services.operations.hold_for_editing(entity_id)

    def _let_go(self) -> None:
        held, self._held = self._held, ""
        self._tasks.start(self._services.operations.release_editing(held), "editor-release")

    async def _load(self, entity_id: str, generation: int) -> None:
        try:
            # Held before it is read: no pull can remove it in between.
            if self._held != entity_id and await self._hold(entity_id):
                self._held = entity_id
                if generation != self._generation and self._entity_id != entity_id:
                    self._let_go()  # the person opened another form meanwhile
            record, state, draft = await self._services.executor.run(
                _open, self._services.store, entity_id
            )
        except StoreError as exc:
            if generation == self._generation:
                self.message.emit(f"Could not open this work order: {exc}")
            return
        if generation != self._generation:
            return  # the person opened another form meanwhile
        if record is None:
            self.message.emit("This work order is no longer on this device.")
            self.newRecord()
            return
        self._entity_id = entity_id
        if self._services.engine is not None:
            # Shown from the cache at once; refreshed in the background if it is stale.
            self._services.engine.revalidate(entity_id)
        self._original = as_form(record)
        self._form = dict(self._original)
        self._server_version = record["server_version"]
        self._state = state
        self._reset_validation()
        self._loaded = True
        if draft is not None:
            self._form = self._drafts.restore(draft, self._original)
            self._touched = set(draft.typed)
            if self.dirty:
                self._validate()
            else:  # typed back to what the work order says now: nothing to restore
                self._drafts.drop(entity_id)
        self.changed.emit()

    @Slot(str, str)
    def setField(self, name: str, value: str) -> None:
        if name not in FIELDS:
            raise ValueError(f"unknown field {name!r}")
        if self._form[name] == value:
            return
        self._form[name] = value
        self._touched.add(name)
        self._validate()
        self.changed.emit()
        self._drafts.typed()

    @Slot()
    def revert(self) -> None:
        """Undo the typing (or discard it, leaving the editor): its draft goes too."""
        self._form = dict(self._original)
        self._reset_validation()
        self._drafts.drop(self._entity_id)
        self.changed.emit()

    def _draft_snapshot(self) -> tuple[str, Draft | None]:
        key = self._entity_id
        if not self.dirty or not self._loaded:
            return key, None
        clock = self._services.clock()
        return key, Draft(key, dict(self._form), dict(self._original), self._server_version, clock)

    @Slot()
    def save(self) -> None:
        self._show_all_errors = True
        clean = self._validate()
        self.changed.emit()
        if clean is None or self._saving:
            return
        if not self.isNew and not clean:
            self.message.emit("Nothing changed.")
            return
        self._saving = True
        self.changed.emit()
        # What is saved is decided now, not when the task runs: the person may open another
        # work order before then.
        op = "create" if self.isNew else "update"
        edit = (op, self._entity_id or None, clean, self._server_version)
        # The draft is written first (the save removes it with the edit, in one transaction):
        # a save that fails, even after the person left the form, leaves all of the typing.
        self._drafts.flush()
        form = dict(self._form)
        self._tasks.start(self._save(self._generation, form, *edit), "editor-save")

    async def _save(
        self,
        generation: int,
        form: dict[str, str],
        op: str,
        entity_id: str | None,
        fields: dict[str, Any],
        base: int | None,
    ) -> None:
        try:
            result = await self._services.operations.save_edit(
                op,  # type: ignore[arg-type]
                entity_id,
                fields,
                base,
                draft=entity_id or NEW_FORM,
            )
        except InvalidEditError as exc:
            self._errors = {"record": str(exc)}
            self.message.emit(f"Not saved: {exc}")
            return
        except StoreError as exc:
            self.message.emit(f"Not saved: {exc}")
            return
        finally:
            self._saving = False
            self.changed.emit()
        self.saved.emit(result.entity_id)
        if self._generation == generation:
            self._drafts.clear()  # saved: no "restored" notice over it any more
            # What was saved is no longer unsaved typing, even before the reload shows it: a
            # sign-out meanwhile must not keep the person on a form "to save it".
            self._original = form
        held = False
        if self._generation == generation:  # still on this form: show what was saved
            await self._load(result.entity_id, generation)
            state = self._state
            held = state is not None and bool(state.dead or state.conflict)
        if held:
            self.message.emit(
                "Saved on this device. It waits behind a change of this work order that needs "
                "you: retry or discard the failed change, or resolve the conflict."
            )
        elif self._services.online:
            self.message.emit("Saved. Sending…")
        else:
            self.message.emit("Saved on this device; will be sent when the server is reachable.")

    def on_bridge_op_changes(self, changes: dict[str, Any]) -> None:
        entity_ids = changes["entity_ids"]
        if self._entity_id and self._entity_id in entity_ids and not self._saving:
            self.on_bridge_records_changed(entity_ids)

    def on_bridge_records_changed(self, entity_ids: list[str]) -> None:
        if not self._entity_id or self._entity_id not in entity_ids:
            return
        if self.dirty:
            self._tasks.start(self._follow(self._entity_id, self._generation), "editor-follow")
        else:
            self._tasks.start(self._load(self._entity_id, self._generation), "editor-refresh")

    async def _follow(self, entity_id: str, generation: int) -> None:
        """The work order changed while the person types: the fields they did not touch take
        the new values and the edit's base moves with them (so the save merges), unless one
        they changed moved too (then the save meets it as a conflict, both values shown)."""
        record, state = await self._services.executor.run(_load, self._services.store, entity_id)
        if generation != self._generation or record is None or not self.dirty:
            return
        self._state = state
        moved = record["server_version"] != self._server_version
        followed = follow_server(self._original, self._form, as_form(record)) if moved else None
        if followed is not None:
            self._original, self._form = followed
            self._server_version = record["server_version"]
            self._validate()
        self.changed.emit()

    # -- validation -------------------------------------------------------------------------

    def _validate(self) -> dict[str, Any] | None:
        clean, self._errors = check_form(self._entity_id, self._form, self._original)
        return clean

    def _reset_validation(self) -> None:
        self._errors = {}
        self._touched = set()
        self._show_all_errors = False

    def _on_task_error(self, exc: BaseException) -> None:
        self._saving = False
        self.changed.emit()
        report(exc)

    # -- properties -------------------------------------------------------------------------

    @Property(str, notify=changed)
    def entityId(self) -> str:
        return self._entity_id

    @Property(bool, notify=changed)
    def isNew(self) -> bool:
        return not self._entity_id

    loaded = notified(bool, "_loaded", changed)

    @Property(QObject, constant=True)
    def draft(self) -> DraftKeeper:
        """Typing restored from an earlier run, and what to choose of it."""
        return self._drafts

    @Property("QVariantMap", notify=changed)
    def fields(self) -> dict[str, str]:
        return dict(self._form)

    @Property("QVariantMap", notify=changed)
    def errors(self) -> dict[str, str]:
        """Messages per field, shown once the field was touched or Save was pressed."""
        if self._show_all_errors:
            return dict(self._errors)
        return {k: v for k, v in self._errors.items() if k in self._touched}

    @Property(str, notify=changed)
    def errorSummary(self) -> str:
        shown = self.errors
        if not shown:
            return ""
        return "; ".join(f"{field_label(k)}: {v}" for k, v in shown.items())

    @Property(bool, notify=changed)
    def dirty(self) -> bool:
        return self._form != self._original

    @Property(bool, notify=changed)
    def canSave(self) -> bool:
        if not self.isNew and not self._loaded:
            return False
        if self._drafts.choosing:
            return False  # a field both sides changed waits for the person's choice
        return not self._saving and not self._errors and (self.isNew or self.dirty)

    saving = notified(bool, "_saving", changed)

    @Property(bool, notify=changed)
    def unsynced(self) -> bool:
        return self._unsynced()

    @Property(str, notify=changed)
    def badge(self) -> str:
        return self._badge().kind

    @Property(str, notify=changed)
    def badgeText(self) -> str:
        return self._badge().text

    @Property(str, notify=changed)
    def syncText(self) -> str:
        if self.isNew:
            return "New work order — saved on this device first, then sent to the server."
        return self._badge().detail

    @Property(list, constant=True)
    def statusValues(self) -> list[str]:
        return list(STATUS_WORDS)

    @Property(list, constant=True)
    def statusLabels(self) -> list[str]:
        return list(STATUS_WORDS.values())

    @Property(list, constant=True)
    def priorityValues(self) -> list[str]:
        return list(PRIORITY_WORDS)

    @Property(list, constant=True)
    def priorityLabels(self) -> list[str]:
        return list(PRIORITY_WORDS.values())

    @Property("QVariantMap", constant=True)
    def fieldLabels(self) -> dict[str, str]:
        """Each field's label by its name, for the form (QML names no field itself)."""
        return dict(FIELD_LABELS)
