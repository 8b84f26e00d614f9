"""View-models tested directly, without QML: editor, status bar, dead letters, diagnostics,
sign-in and settings."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from app.credentials import NoKeyringError
from app.events import (
    AuthRequired,
    ConnectivityChanged,
    EventBus,
    LastSyncChanged,
    QueueChanged,
    SyncProgress,
)
from app.states import Reason
from app.store.errors import StorageBusyError
from app.store.store import Store
from app.sync.conflicts import Conflicts
from tests.ui.conftest import Runner, add_orders, make_conflict, make_dead
from tests.ui.fake_engine import FakeEngine, FakeReport
from ui.qt import connect
from ui.services import Services
from ui.viewmodels import editor as editor_module
from ui.viewmodels.conflicts import ConflictViewModel
from ui.viewmodels.deadletters import DeadLetterModel, validate_payload
from ui.viewmodels.diagnostics import DiagnosticsViewModel
from ui.viewmodels.editor import EditorViewModel
from ui.viewmodels.settings import SettingsViewModel, load_sync_on_metered
from ui.viewmodels.signin import SignInViewModel
from ui.viewmodels.statusbar import StatusBarViewModel

# -- editor -------------------------------------------------------------------------------


def test_editor_validates_like_the_server_and_saves_pending(
    run: Runner, services: Services, root: Any, store: Store, qtbot: Any
) -> None:
    editor = EditorViewModel(services, root)
    editor.newRecord()
    assert editor.isNew
    assert editor.syncText.startswith("New work order")
    editor.setField("due_date", "tomorrow")
    assert "due_date" in editor.errors  # touched: shown
    assert "title" not in editor.errors  # untouched: not yet
    assert not editor.canSave
    editor.save()  # pressing Save shows every error, saves nothing
    assert "title" in editor.errors
    assert store.cache.count() == 0
    editor.setField("title", "Inspect boiler")
    editor.setField("due_date", "2026-12-31")
    assert editor.errors == {}
    assert editor.canSave
    with qtbot.wait_signal(editor.saved) as saved:
        editor.save()
        run(editor.wait_idle())
    entity_id = saved.args[0]
    run(editor.wait_idle())
    assert editor.entityId == entity_id
    assert (editor.badge, editor.unsynced, editor.dirty) == ("pending", True, False)
    assert store.cache.get(entity_id)["due_date"] == "2026-12-31"


def test_editor_shows_the_work_order_last_opened_whatever_finishes_later(
    run: Runner, services: Services, root: Any, store: Store, monkeypatch: Any
) -> None:
    first, second = add_orders(store, 2)
    editor = EditorViewModel(services, root)
    editor.load(first)
    run(editor.wait_idle())
    editor.setField("notes", "seals checked")
    # Save, then Back and open the other one before the save's reload comes back.
    editor.save()
    editor.load(second)
    assert not editor.canSave, "nothing can be saved before the second one is read"
    assert editor.fields["title"] == "", "nothing of the first one stays on screen"
    run(editor.wait_idle())
    assert editor.entityId == second
    assert editor.fields["title"] == store.cache.get(second)["title"]
    assert store.cache.get(first)["notes"] == "seals checked"

    # Opening fails (the store is locked): the screen shows neither record, and Save is off.
    def locked(*args: Any) -> Any:
        raise StorageBusyError("database is locked")

    monkeypatch.setattr(editor_module, "_load", locked)
    messages: list[str] = []
    editor.message.connect(messages.append)
    editor.load(first)
    run(editor.wait_idle())
    assert editor.entityId == first
    assert not editor.loaded
    assert not editor.canSave
    assert editor.fields["title"] == ""
    assert messages == ["Could not open this work order: database is locked"]


def _pulled_version_2(store: Store, entity_id: str, **fields: Any) -> None:
    """A pull brings version 2 of a work order, as the office changed it."""
    from app.sync.reconcile import apply_page

    record = {**store.cache.get(entity_id), **fields, "id": entity_id, "version": 2}
    record = {key: record[key] for key in (*editor_module.FIELDS, "id", "version")}
    apply_page(store, [{**record, "deleted": False}], "next")


@pytest.mark.parametrize("office_changes", ["site", "notes"])
def test_typing_follows_a_pull_on_fields_not_typed_in(
    run: Runner, services: Services, root: Any, store: Store, office_changes: str
) -> None:
    (entity_id,) = add_orders(store, 1)
    editor = EditorViewModel(services, root)
    editor.load(entity_id)
    run(editor.wait_idle())
    editor.setField("notes", "seals checked")
    _pulled_version_2(store, entity_id, **{office_changes: "changed at the office"})
    editor.on_bridge_records_changed([entity_id])
    run(editor.wait_idle())
    assert editor.fields["notes"] == "seals checked", "the typing stays"
    assert editor.dirty
    editor.save()
    run(editor.wait_idle())
    [(base,)] = store.read("SELECT base_version FROM jobs WHERE finished_at IS NULL")
    if office_changes == "site":
        # Another field moved: it shows, and the edit is made on the new version (it merges).
        assert editor.fields["site"] == "changed at the office"
        assert base == 2
    else:
        # The field typed in moved too: the edit keeps its base and meets it as a conflict.
        assert base == 1


def test_a_second_new_form_is_not_replaced_by_the_first_ones_save(
    run: Runner, services: Services, root: Any, store: Store
) -> None:
    editor = EditorViewModel(services, root)
    editor.newRecord()
    editor.setField("title", "First pump")
    editor.save()
    editor.newRecord()  # "+ New" again before the save comes back
    editor.setField("title", "Second pump, typing")
    run(editor.wait_idle())
    assert editor.isNew
    assert editor.fields["title"] == "Second pump, typing"
    assert [row["title"] for row in store.cache.query()] == ["First pump"]


def test_editor_edit_revert_and_nothing_changed(
    run: Runner, services: Services, root: Any, store: Store, qtbot: Any
) -> None:
    (entity_id,) = add_orders(store, 1)
    services.engine = engine = FakeEngine()
    editor = EditorViewModel(services, root)
    editor.load(entity_id)
    run(editor.wait_idle())
    assert (editor.badge, editor.unsynced) == ("synced", False)
    # Shown from the cache at once, and handed to the engine to refresh if stale.
    assert engine.revalidated == [entity_id]
    with qtbot.wait_signal(editor.message) as message:
        editor.save()
    assert message.args == ["Nothing changed."]
    editor.setField("notes", "seals checked")
    assert editor.dirty
    editor.revert()
    assert not editor.dirty
    assert editor.fields["notes"] == ""
    editor.setField("notes", "seals checked")
    editor.save()
    run(editor.wait_idle())
    assert editor.badgeText == "Pending (1 edit)"


# -- status bar ---------------------------------------------------------------------------


def test_status_bar_says_what_waits_for_a_person(
    run: Runner, services: Services, root: Any, store: Store
) -> None:
    # Before: "Nothing waiting to send" with 50 failed changes; they showed only in the menu.
    status = StatusBarViewModel(services, root)
    status.refresh()
    run(status.wait_idle())
    assert status.attentionText == ""
    make_dead(store)
    status.refresh()
    run(status.wait_idle())
    assert status.attentionText == "1 failed change needs you"
    make_dead(store, title="Broken valve")
    status.refresh()
    run(status.wait_idle())
    assert status.pendingText == "Nothing waiting to send"
    assert status.attentionText == "2 failed changes need you"


def test_status_bar_follows_the_core(
    run: Runner, services: Services, root: Any, store: Store, bus: EventBus
) -> None:
    assert StatusBarViewModel(services, root).connectivityText == "Sync is not running"
    engine = FakeEngine()
    services.engine = engine
    status = StatusBarViewModel(services, root)
    store.record_edit("create", None, {"title": "Waiting one"})
    status.refresh()
    run(status.wait_idle())
    assert status.connectivity == "connecting"
    assert status.connectivityText == "Connecting…"
    assert status.pendingCount == 1
    assert status.pendingText.startswith("1 change waiting, oldest ")
    assert status.lastSyncText == "Never synced"

    bus.publish(ConnectivityChanged("offline", "no route"))
    assert status.connectivityText == "Offline"
    engine.report = FakeReport(problem="offline")
    messages: list[str] = []
    status.message.connect(messages.append)
    status.syncNow()
    run(status.wait_idle())
    assert engine.sync_calls == 1
    assert messages == ["Not synced: this device is offline."]
    assert status.lastSyncText == "Never synced"

    bus.publish(ConnectivityChanged("online", ""))
    bus.publish(SyncProgress(3, 10, "flush"))
    assert status.syncing
    assert status.progressText == "Sending 3 of 10"
    assert status.progressFraction == 0.3
    bus.publish(SyncProgress(0, 0, "pull"))
    bus.publish(SyncProgress(0, 0, "idle"))
    # The end of a pull's progress alone is no sync (one cut by a network failure ends too):
    # the engine says when one completed.
    assert status.lastSyncText == "Never synced"
    bus.publish(LastSyncChanged(time.time()))
    bus.publish(QueueChanged({"pending": 0, "leased": 0, "dead": 2, "conflict": 1}, None))
    assert not status.syncing
    assert status.pendingText == "Nothing waiting to send"
    assert (status.failedCount, status.conflictCount) == (2, 1)
    assert status.lastSyncText == "Last synced just now"

    bus.publish(AuthRequired("http://x", "token revoked"))
    assert status.connectivity == "signed_out"
    assert status.connectivityText == "Signed out"
    bus.publish(ConnectivityChanged("connecting", "probe"))
    assert status.connectivity == "signed_out"  # a probe does not fix a refused token
    status.signed_in()
    assert status.connectivity == "connecting"


# -- dead letters -------------------------------------------------------------------------


def test_dead_letters_retry_the_checked_ones_at_once(
    run: Runner, services: Services, root: Any, store: Store
) -> None:
    jobs = [make_dead(store, title=f"Refused {i}") for i in range(3)]
    services.engine = FakeEngine()
    dead = DeadLetterModel(services, root)
    dead.reload()
    run(dead.wait_idle())
    dead.setChecked(jobs[0], True)
    dead.setChecked(jobs[2], True)
    dead.retryChecked()
    run(dead.wait_idle())
    statuses = dict(store.db.execute_sql("SELECT id, status FROM jobs").fetchall())
    assert statuses == {jobs[0]: "pending", jobs[1]: "dead", jobs[2]: "pending"}
    assert dead.count == 1


def test_dead_letters_filter_select_history_retry_discard_export(
    run: Runner, services: Services, root: Any, store: Store
) -> None:
    refused = make_dead(store, title="Refused one")
    gave_up = make_dead(
        store, title="Gave up", error="gave up after 12 attempts", status=0, code=Reason.GAVE_UP
    )
    services.engine = FakeEngine()
    told: list[dict[str, Any]] = []
    connect(services.bridge.opChanges, told.append)
    dead = DeadLetterModel(services, root)
    dead.reload()
    run(dead.wait_idle())
    assert dead.count == 2
    assert dead.rowCount() == 2
    assert dead.kindValues == ["", "rejected", "gave_up"]
    assert dead.kindLabels[0] == "All kinds (2)"
    dead.kindFilter = "gave_up"
    assert dead.count == 1
    assert dead.get(0)["jobId"] == gave_up
    assert dead.get(0)["errorText"].startswith("Could not reach the server after many tries")
    dead.kindFilter = ""
    dead.select(refused)
    selected = dead.selected
    assert selected["errorText"].startswith("The server refused the change as invalid.")
    assert json.loads(selected["payloadJson"])["op"] == "create"
    assert len(dead.history) == 1
    assert "HTTP 422" in dead.history[0]

    assert not dead.retryEdited(refused, '{"op": "update", "fields": {}}')
    assert "at least one field" in dead.editError
    dead.retry(refused)
    run(dead.wait_idle())
    assert dead.count == 1
    # The retry told the queue changed, naming this screen; the engine wakes on that itself.
    assert [(c["queue"], c["initiator"]) for c in told] == [(True, "dead-letters")]
    assert store.db.execute_sql("SELECT status FROM jobs WHERE id = ?", (refused,)).fetchone() == (
        "pending",
    )

    dead.setChecked(gave_up, True)
    path = Path(dead.exportChecked())
    run(dead.wait_idle())
    assert json.loads(path.read_text())[0]["job_id"] == gave_up
    dead.discardChecked()
    run(dead.wait_idle())
    assert dead.count == 0
    assert dead.checkedCount == 0


def test_validate_payload_reasons() -> None:
    assert validate_payload('{"op": "delete"}') == {"op": "delete", "fields": {}}
    for text, reason in [
        ("{nope", "Not valid JSON"),
        ('{"op": "create", "fields": {}, "x": 1}', "nothing else"),
        ('{"op": "move", "fields": {}}', "Unknown operation"),
        ('{"op": "delete", "fields": {"title": "x"}}', "takes no fields"),
    ]:
        with pytest.raises(ValueError, match=reason):
            validate_payload(text)


# -- diagnostics --------------------------------------------------------------------------


def test_diagnostics_in_words_and_an_hour_of_samples(
    run: Runner, services: Services, root: Any, store: Store
) -> None:
    diagnostics = DiagnosticsViewModel(services, root, interval_s=30)
    assert diagnostics.facts == [{"label": "Status", "text": "Reading the local database…"}]
    diagnostics.refresh()
    run(diagnostics.wait_idle())
    facts = {f["label"]: f["text"] for f in diagnostics.facts}
    assert facts["Server"] == "sync is not running in this window"
    assert facts["Waiting to send"] == "Nothing"
    stats = {
        "queue_depth": {"pending": 4, "leased": 1, "dead": 2, "conflict": 1, "done": 9},
        "oldest_pending_age_s": 120,
        "counters": {"duplicates_detected": 3, "conflicts_auto_merged": 2},
        "attempt_histogram": {"1": 7, "2": 2},
        "database_size_bytes": 3 * 1024 * 1024,
    }
    services.engine = FakeEngine()
    start = time.time() + 1
    for minute in range(90):  # 90 minutes of samples: only the last hour is kept
        diagnostics.record(stats, start + minute * 60)
    assert len(diagnostics.depthSeries) == 61
    assert diagnostics.depthCaption == "Waiting to send over the last 1 h 0 min: now 5, peak 5"
    assert diagnostics.histogram == [{"label": "1", "count": 7}, {"label": "2", "count": 2}]
    assert diagnostics.histogramMax == 7
    facts = {f["label"]: f["text"] for f in diagnostics.facts}
    assert facts["Waiting to send"] == "5 changes"
    assert facts["Oldest waiting"] == "queued 2 min ago"
    assert facts["Conflicts seen"] == "3"
    assert facts["Database size"] == "3.0 MB"
    assert facts["Server"] == "online"
    assert facts["Clock"] == "this device is 900 s off the server"


# -- sign-in ------------------------------------------------------------------------------


def test_sign_in_checks_input_keeps_the_token_write_only(
    run: Runner, services: Services, root: Any, bus: EventBus, qtbot: Any
) -> None:
    stored: list[tuple[str, str]] = []
    vm = SignInViewModel(services, root, store_token_fn=lambda u, t: stored.append((u, t)))
    assert not vm.canSignIn
    vm.serverUrl = "ftp://sync.example.org"
    vm.setToken("fst_secret")
    vm.signIn()
    assert vm.error.startswith("Check the server address")
    assert not hasattr(vm, "token")
    bus.publish(AuthRequired("https://Sync.Example.org/", "token revoked"))
    assert vm.serverUrl == "https://Sync.Example.org/"
    assert vm.reason == "Sign in again: token revoked"
    with qtbot.wait_signal(vm.signedIn) as signed_in:
        vm.signIn()
        run(vm.wait_idle())
    assert signed_in.args == ["https://sync.example.org", "fst_secret"]
    assert stored == [("https://sync.example.org", "fst_secret")]
    assert (vm.reason, vm.error, vm.canSignIn) == ("", "", False)  # the token is forgotten


def test_sign_in_without_a_keyring_says_so(run: Runner, services: Services, root: Any) -> None:
    def no_keyring(url: str, token: str) -> None:
        raise NoKeyringError("no D-Bus session")

    vm = SignInViewModel(services, root, store_token_fn=no_keyring)
    vm.serverUrl = "https://sync.example.org"
    vm.setToken("fst_secret")
    vm.signIn()
    run(vm.wait_idle())
    assert "No usable system keyring" in vm.error
    assert "fst_secret" not in vm.error
    assert not vm.busy


# -- settings -----------------------------------------------------------------------------


def test_sync_on_metered_is_on_by_default_persisted_and_given_to_the_engine(
    run: Runner, services: Services, root: Any, store: Store
) -> None:
    from app.sync.engine import SyncConfig

    engine = FakeEngine()
    engine.config = SyncConfig(server_url="http://127.0.0.1:9")
    services.engine = engine
    settings = SettingsViewModel(services, root)
    settings.reload()
    run(settings.wait_idle())
    assert settings.syncOnMetered
    settings.setSyncOnMetered(False)
    run(settings.wait_idle())
    assert not load_sync_on_metered(store)
    assert engine.config.sync_on_metered is False
    assert engine.wakes == 1
    again = SettingsViewModel(services, root)
    again.reload()
    run(again.wait_idle())
    assert not again.syncOnMetered


def test_conflict_screen_says_why_the_admin_review_could_not_be_opened(
    run: Runner, services: Services, root: Any, store: Store
) -> None:
    entity_id, job_id = make_conflict(store)
    conflicts = Conflicts(store)
    conflicts.escalate(job_id, "please look")
    conflicts.escalation_refused(job_id, "entity unknown (422)")
    screen = ConflictViewModel(services, root)
    screen.openForEntity(entity_id)
    run(screen.wait_idle())
    assert screen.explanation.endswith(
        "The admin review could not be opened: entity unknown (422)."
    )


def test_dead_letters_word_a_failure_from_its_reason_code_not_its_text(
    run: Runner, services: Services, root: Any, store: Store
) -> None:
    # Words that once steered the English matching ("invalid", "attempts"); the code decides.
    gone = make_dead(
        store, title="Gone", error="invalid after 3 attempts", status=0, code=Reason.NOT_FOUND
    )
    dead = DeadLetterModel(services, root)
    dead.reload()
    run(dead.wait_idle())
    assert dead.kindValues == ["", "not_found"]
    assert dead.get(0)["jobId"] == gone
    assert dead.get(0)["errorText"] == (
        "The work order no longer exists on the server. (invalid after 3 attempts)"
    )
