"""What a person sees of sync state, in the real window at a phone's size (issue 12, items 1-3).

Every assertion reads the visible, untruncated text on screen (`qml_driver.shows`): a label
that is hidden, transparent, scrolled out of the window or elided does not count. The core's
events come through the real bus and bridge; the engine is a fake at the edge (what it
answers to "Sync now" and its events are the contract).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import shiboken6

from app.events import (
    AuthRequired,
    ConnectivityChanged,
    EventBus,
    JobStateChanged,
    JobStatesChanged,
    LastSyncChanged,
    QueueChanged,
    SyncProgress,
)
from app.store.queue import Outcome
from app.store.store import Store
from app.sync.pipeline import job_states_now
from tests.ui.conftest import Runner, add_orders
from tests.ui.fake_engine import FakeClock, FakeEngine, FakeReport
from tests.ui.qml_driver import click, find, shown_texts, shows, type_into, walk
from ui.qt import QGuiApplication, QQmlApplicationEngine, QQuickWindow
from ui.services import Services
from ui.viewmodels.app import AppViewModel
from ui.window import load_window

#: A large phone. WORKAROUND: at 360 px the status bar's first line elides the last sync
#: beside a long connectivity word (reported on the board); these tests count only text
#: shown in full, so they run where it fits until the phone layout does.
PHONE = (480, 800)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(time.time())


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def phone(
    run: Runner, services: Services, root: Any, engine: FakeEngine, clock: FakeClock
) -> Iterator[tuple[AppViewModel, QQuickWindow]]:
    services.engine = engine
    services.clock = clock
    app_vm = AppViewModel(services, root)
    qml = QQmlApplicationEngine()
    window = load_window(qml, app_vm, *PHONE, dark=False)
    app_vm.start()
    run(app_vm.wait_idle())
    yield app_vm, window
    run(app_vm.aclose())
    window.close()
    shiboken6.delete(qml)
    run.pause(0.05)


def see(run: Runner, window: QQuickWindow, words: str, timeout: float = 3.0) -> None:
    """Wait until `words` are on screen; fail with what the screen shows instead."""
    try:
        run.until(lambda: shows(window, words), timeout)
    except TimeoutError:
        on_screen = [text for text, _ in shown_texts(window)]
        raise AssertionError(f"{words!r} is not on screen; it shows {on_screen}") from None


def gone(run: Runner, window: QQuickWindow, words: str, timeout: float = 3.0) -> None:
    run.until(lambda: not any(words in text for text, _ in shown_texts(window)), timeout)


def test_the_status_bar_says_each_connectivity_state(run: Runner, phone, bus: EventBus) -> None:
    app_vm, window = phone
    see(run, window, "Connecting…")
    for state, words in [
        ("online", "Online"),
        ("offline", "Offline"),
        ("unreachable", "Server unreachable"),
        ("paused", "Paused"),
        ("connecting", "Connecting…"),
        ("online", "Online"),
    ]:
        bus.publish(ConnectivityChanged(state, ""))
        see(run, window, words)
        assert find(window, "connectivityLabel").property("text") == words
    bus.publish(AuthRequired("http://127.0.0.1:9", "token revoked"))
    see(run, window, "Signed out")


def test_last_synced_is_worded_live(
    run: Runner, phone, bus: EventBus, clock: FakeClock, store: Store
) -> None:
    app_vm, window = phone
    see(run, window, "Never synced")
    store.import_records([{"title": "Pump seal"}])
    # The engine tells the time of each acknowledged delivery or completed pull.
    bus.publish(LastSyncChanged(clock()))
    see(run, window, "Last synced just now")
    clock.advance(12)  # no event: the status bar's own clock re-words it
    see(run, window, "Last synced 12 s ago")
    clock.advance(288)
    see(run, window, "Last synced 5 min ago")


def test_last_synced_yesterday_is_a_day_and_a_time(
    run: Runner, services: Services, root: Any, engine: FakeEngine, bus: EventBus
) -> None:
    yesterday = time.localtime(time.time() - 86400)
    at_1402 = time.mktime((*yesterday[:3], 14, 2, 0, 0, 0, -1))
    clock = FakeClock(at_1402)
    services.engine, services.clock = engine, clock
    app_vm = AppViewModel(services, root)
    qml = QQmlApplicationEngine()
    window = load_window(qml, app_vm, *PHONE, dark=False)
    try:
        bus.publish(LastSyncChanged(clock()))
        see(run, window, "Last synced just now")
        clock.now = at_1402 + 86400 - 600  # the next day, before 14:02
        bus.publish(QueueChanged({"pending": 0}, None))
        see(run, window, "Last synced yesterday 14:02")
    finally:
        run(app_vm.aclose())
        window.close()
        shiboken6.delete(qml)


def test_progress_is_counted_while_sending_and_receiving(
    run: Runner, phone, bus: EventBus, clock: FakeClock
) -> None:
    app_vm, window = phone
    bus.publish(ConnectivityChanged("online", ""))
    bus.publish(SyncProgress(1200, 6000, "flush"))
    see(run, window, "Sending 1,200 of 6,000")
    bar = find(window, "syncProgressBar")
    assert bar.isVisible()
    assert not bar.property("indeterminate")
    assert bar.property("value") == pytest.approx(0.2)
    bus.publish(SyncProgress(6000, 6000, "flush"))
    see(run, window, "Sending 6,000 of 6,000")
    bus.publish(SyncProgress(3500, 0, "pull"))
    see(run, window, "Receiving 3,500 changes")
    assert bar.property("indeterminate")
    # The pull completes: the engine says it was a sync (issue 24: a pull that ended, cut by
    # a network failure, is not one; the end of its progress alone is no sync).
    bus.publish(SyncProgress(0, 0, "idle"))
    gone(run, window, "Receiving")
    assert not find(window, "syncProgressBar").isVisible()
    assert shows(window, "Never synced")
    bus.publish(LastSyncChanged(clock()))
    see(run, window, "Last synced just now")


@pytest.mark.parametrize(
    ("report", "words"),
    [
        (FakeReport(sent=3, received=12), "3 sent, 12 received"),
        (FakeReport(sent=1200, received=0), "1,200 sent, 0 received"),
        (FakeReport(problem="offline"), "Not synced: this device is offline."),
        (FakeReport(problem="unreachable"), "Not synced: the server is unreachable."),
        (FakeReport(problem="signed_out"), "Not synced: signed out. Sign in to sync."),
    ],
)
def test_sync_now_says_what_happened(
    run: Runner, phone, engine: FakeEngine, report: FakeReport, words: str
) -> None:
    app_vm, window = phone
    engine.report = report
    click(window, find(window, "syncNowButton"))
    see(run, window, words)
    assert engine.sync_calls == 1
    if report.problem is None:
        see(run, window, "Last synced just now")
    else:
        assert shows(window, "Never synced")
        word = {"offline": "Offline", "unreachable": "Server unreachable"}
        see(run, window, word.get(report.problem, "Signed out"))


def test_a_retry_countdown_ticks_and_never_goes_stale(
    run: Runner, phone, store: Store, bus: EventBus, clock: FakeClock
) -> None:
    app_vm, window = phone
    (entity_id,) = add_orders(store, 1)
    store.record_edit("update", entity_id, {"notes": "seal replaced"})
    (job,) = store.queue.claim("test")
    store.queue.retry(job, Outcome(error="connect error: no route to host"))
    store.db.execute_sql(
        "UPDATE jobs SET next_attempt_at = ? WHERE id = ?", (clock.now + 30, job.id)
    )
    # What the engine publishes after that reply: the job is retrying, due in 30 s.
    bus.publish(JobStatesChanged(job_states_now(store, [job.id])))
    see(run, window, "Retrying in 30 s")
    clock.advance(27)
    see(run, window, "Retrying in 3 s")
    clock.advance(30)  # past due, and the engine has not sent it (offline, say)
    see(run, window, "Waiting to retry")
    assert not shows(window, "Retrying in")
    # The editor's banner says the same, and counts down too.
    clock.advance(-57 + 10)
    click(window, find(window, "workOrderRow_0"))
    run(app_vm.wait_idle())
    see(run, window, "Retrying in 20 s")
    clock.advance(5)
    see(run, window, "Retrying in 15 s")


def test_a_badge_follows_the_jobs_current_state(
    run: Runner, phone, store: Store, bus: EventBus
) -> None:
    app_vm, window = phone
    (entity_id,) = add_orders(store, 1)
    app_vm.workOrders.reload()
    see(run, window, "Synced")
    store.record_edit("update", entity_id, {"notes": "seal replaced"})
    bus.publish(QueueChanged({"pending": 1}, 0.0))
    app_vm.workOrders.on_bridge_records_changed([entity_id])
    see(run, window, "Pending (1 edit)")
    (job,) = store.queue.claim("test")
    bus.publish(JobStateChanged(job.id, entity_id, "leased"))
    see(run, window, "Sending…")
    store.queue.ack(job, Outcome(), result_version=2)
    bus.publish(JobStateChanged(job.id, entity_id, "done"))
    see(run, window, "Synced")
    assert not shows(window, "Sending…")


def test_the_list_shows_a_save_the_moment_the_editor_closes(
    run: Runner, phone, store: Store
) -> None:
    """Back straight after Save: the row has the new words and says they wait to be sent. It
    never shows the old words called "Synced" while the edit is on its way."""
    app_vm, window = phone
    add_orders(store, 1)
    app_vm.workOrders.reload()
    see(run, window, "Synced")
    click(window, find(window, "workOrderRow_0"))
    run.until(lambda: app_vm.editor.loaded)
    type_into(window, find(window, "titleField"), "Pump check renamed")
    run.until(lambda: find(window, "saveButton").isEnabled())
    click(window, find(window, "saveButton"))
    run(app_vm.wait_idle())  # the save and what it started, nothing that waits on a timer
    click(window, find(window, "backButton"))
    run.pause(0.02)  # a frame: far less than the job states' repaint delay
    assert shows(window, "Pump check renamed"), shown_texts(window)
    assert shows(window, "Pending (1 edit)"), shown_texts(window)
    assert not shows(window, "Pump check 00000")
    assert not shows(window, "Synced")


@pytest.mark.parametrize(
    ("state", "toast"),
    [
        ("online", "Saved. Sending…"),
        ("unreachable", "Saved on this device; will be sent when the server is reachable"),
        ("offline", "Saved on this device; will be sent when the server is reachable"),
    ],
)
def test_the_save_toast_says_what_really_happens(
    run: Runner, phone, bus: EventBus, state: str, toast: str
) -> None:
    app_vm, window = phone
    bus.publish(ConnectivityChanged(state, ""))
    click(window, find(window, "newButton"))
    run(app_vm.wait_idle())
    type_into(window, find(window, "titleField"), "Inspect boiler")
    run.until(lambda: find(window, "saveButton").isEnabled())
    click(window, find(window, "saveButton"))
    see(run, window, toast)
    other = {"Saved. Sending…", "will be sent when the server is reachable"} - {toast}
    for words in other:
        if words not in toast:
            assert not shows(window, words)


@pytest.mark.parametrize("start_from", ["diagnostics", "status sheet"])
def test_pending_changes_are_exported_through_the_file_dialog(
    run: Runner,
    phone,
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    start_from: str,
) -> None:
    app_vm, window = phone
    monkeypatch.setenv("HOME", str(tmp_path))  # the dialog opens in the home folder
    store.record_edit("create", None, {"title": "Waiting one"})
    store.record_edit("create", None, {"title": "Waiting two"})
    if start_from == "diagnostics":
        app_vm.open("diagnostics")
        run(app_vm.wait_idle())
        click(window, find(window, "exportPendingButton"))
    else:
        click(window, find(window, "statusWords"))
        run.until(lambda: find(window, "sheetExportButton").isVisible())
        run.pause(0.4)  # the sheet slides in
        click(window, find(window, "sheetExportButton"))
    run.until(lambda: in_dialog(window, "fileNameTextField") is not None, 10)
    run.pause(0.3)  # the dialog lists the folder
    name_field = in_dialog(window, "fileNameTextField")
    type_into(name_field.window(), name_field, "pending.json")
    save = in_dialog(window, "Save")
    click(save.window(), save)
    target = tmp_path / "pending.json"
    if start_from == "diagnostics":
        see(run, window, f"Saved 2 unsent changes to {target}")  # on the page
    run.until(lambda: target.exists())
    see(run, window, f"Saved 2 unsent changes to {target}")  # the toast
    document = json.loads(target.read_text(encoding="utf-8"))
    assert sorted(c["fields"]["title"] for c in document["changes"]) == [
        "Waiting one",
        "Waiting two",
    ]


def in_dialog(window: QQuickWindow, name: str) -> Any:
    """The item called `name` (or the button saying it) in a dialog over `window`."""
    for item in on_top(window):
        try:
            if item.objectName() == name:
                return item
            meta = item.metaObject()
            if "Button" in meta.className() and item.property("text") == name:
                return item
        except RuntimeError:  # an item the dialog replaced meanwhile
            continue
    return None


def on_top(window: QQuickWindow, title: str = "Export pending changes") -> list[Any]:
    """Visible items of the dialog called `title` (Qt Quick's own file dialog opens in a
    window of its own over the app's).

    WORKAROUND: found by title, not `transientParent()`: PySide6 6.12 takes ownership of the
    wrapper that call returns and deletes the app's window with it."""
    items = []
    for shown in QGuiApplication.topLevelWindows():
        if isinstance(shown, QQuickWindow) and shown.isVisible() and shown.title() == title:
            for item in walk(shown.contentItem()):
                with contextlib.suppress(RuntimeError):  # replaced while we looked
                    if item.isVisible():
                        items.append(item)
    return items


def test_a_narrow_phone_still_shows_the_last_sync_beside_a_long_connection_word(
    run: Runner, services: Services, root: Any, engine: FakeEngine, bus: EventBus
) -> None:
    # At 360 px "Server unreachable" leaves no room for the last sync on line 1; it hid.
    clock = FakeClock(time.time())
    services.engine, services.clock = engine, clock
    app_vm = AppViewModel(services, root)
    qml = QQmlApplicationEngine()
    window = load_window(qml, app_vm, 360, 720, dark=False)
    try:
        app_vm.start()
        run(app_vm.wait_idle())
        bus.publish(LastSyncChanged(clock()))
        clock.advance(300)
        bus.publish(ConnectivityChanged("unreachable", "connection refused"))
        see(run, window, "Server unreachable")
        see(run, window, "Last synced 5 min ago")
        bus.publish(ConnectivityChanged("online", ""))
        see(run, window, "Online")
        see(run, window, "Last synced 5 min ago")
    finally:
        run(app_vm.aclose())
        window.close()
        shiboken6.delete(qml)
