"""Photos and files in the real window at a phone's size (issue 15, "The app").

A file is chosen in the real Qt Quick file dialog and attached through the real core
(`app.attachments`): copied into the data dir, its upload queued. What the strip, the
full-screen view and the list row say is read from the visible, untruncated text on screen.
The uploader's progress reaches the window as the core's `UploadProgress` event on the bus.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from typing import Any

import pytest

from app.attachments import Attachments, AttachmentView
from app.events import ConnectivityChanged, EventBus, UploadProgress
from app.states import AttachmentState
from app.store.jobs import TOPIC_ATTACHMENTS
from app.store.queue import Outcome
from app.store.store import Store
from tests.ui.conftest import Open, Runner, add_orders
from tests.ui.qml_driver import (
    check_phone_layout,
    click,
    find,
    polish_ancestors,
    scroll_into_view,
    shown_texts,
    shows,
    walk,
)
from tests.ui.test_status_on_screen import on_top
from ui.qt import QColor, QImage, QQuickWindow
from ui.services import Services
from ui.viewmodels.app import AppViewModel


def see(run: Runner, window: QQuickWindow, words: str, timeout: float = 5.0) -> None:
    """Wait until `words` are on screen, scrolled to as a person would (the strip is below
    the editor's fields on a phone); fail with what the screen shows instead."""

    def shown() -> bool:
        for name in ("addAttachmentButton", "attachmentsHeading"):
            item = find(window, name)
            if item.isVisible():
                polish_ancestors(item)
                scroll_into_view(item)
        return shows(window, words)

    try:
        run.until(shown, timeout)
    except TimeoutError:
        on_screen = [text for text, _ in shown_texts(window)]
        raise AssertionError(f"{words!r} is not on screen; it shows {on_screen}") from None


def tap(run: Runner, window: QQuickWindow, name: str) -> None:
    """Tap the item called `name` once the page under it stands still: a press on a page
    still moving back into its bounds (the strip grew or shrank) only stops it, for a
    person's finger too."""
    item = find(window, name)
    flick = item.parentItem()
    while flick is not None and "Flickable" not in flick.metaObject().className():
        flick = flick.parentItem()
    polish_ancestors(item)
    scroll_into_view(item)
    if flick is not None:
        run.until(lambda: not flick.property("moving"))
    # Found again: while the page settled, a list may have been rebuilt under it (the failed
    # changes reload when the engine reports), and the item found first deleted with it.
    item = find(window, name)
    click(window, item)


def photo(path: Path, colour: str = "#3a7") -> Path:
    image = QImage(640, 480, QImage.Format.Format_RGB32)
    image.fill(QColor(colour))
    assert image.save(str(path))
    return path


@pytest.fixture
def editor(
    run: Runner, open_window: Open, store: Store, home: Path
) -> tuple[AppViewModel, QQuickWindow, str]:
    (entity_id,) = add_orders(store, 1, title="Replace valve")
    app_vm, window = open_window(360, 720)
    app_vm.openWorkOrder(entity_id)
    run(app_vm.wait_idle())
    return app_vm, window, entity_id


def attached(store: Store, entity_id: str) -> list[AttachmentView]:
    return Attachments(store).list_for(entity_id)


def text_of(item: Any) -> Any:
    """An item's text, None without one. WORKAROUND: asked of an item that has no `text`,
    PySide6 6.12 returns None and drops a reference to it each time (CPython aborts in the
    end, as qml_driver.shown_texts says): ask the meta-object first."""
    if item.metaObject().indexOfProperty("text") < 0:
        return None
    return item.property("text")


def choose_in_dialog(run: Runner, window: QQuickWindow, filename: str) -> None:
    """Pick `filename` in the open "Add photo or file" dialog and press Open."""

    def entry() -> Any:
        for item in on_top(window, "Add photo or file"):
            with contextlib.suppress(RuntimeError):  # the dialog replaced it meanwhile
                if item.objectName().startswith("fileDialogDelegate") and any(
                    text_of(label) == filename for label in walk(item)
                ):
                    return item
        return None

    run.until(lambda: entry() is not None, 10)
    run.pause(0.3)  # the dialog lists the folder
    item = entry()
    click(item.window(), item)
    run.pause(0.1)
    (button,) = [
        item
        for item in on_top(window, "Add photo or file")
        if "Button" in item.metaObject().className() and item.property("text") == "Open"
    ]
    click(button.window(), button)


def test_a_photo_chosen_in_the_dialog_is_attached_and_waits_on_screen(
    run: Runner, editor: tuple[AppViewModel, QQuickWindow, str], store: Store, home: Path
) -> None:
    app_vm, window, entity_id = editor
    source = photo(home / "Pictures" / "meter.png")
    see(run, window, "No photos or files yet.")
    tap(run, window, "addAttachmentButton")
    choose_in_dialog(run, window, "meter.png")
    see(run, window, "Added meter.png.")
    see(run, window, "Photos and files (1)")
    see(run, window, "Waiting to upload")
    # The real core holds it: a copy by content in the data dir, its upload queued.
    (view,) = attached(store, entity_id)
    assert view.filename == "meter.png"
    assert view.state is AttachmentState.WAITING
    assert view.sha256 == hashlib.sha256(source.read_bytes()).hexdigest()
    assert view.local_path is not None
    assert view.local_path.read_bytes() == source.read_bytes()
    # The thumbnail is the photo itself, read from the device's copy.
    run.until(lambda: find(window, "attachmentImage_0").isVisible())
    check_phone_layout(window)

    # The list row counts it and says what waits.
    app_vm.back()
    run(app_vm.wait_idle())
    see(run, window, "1 · 1 photo waiting")


def test_the_strip_follows_the_uploaders_progress(
    run: Runner,
    editor: tuple[AppViewModel, QQuickWindow, str],
    store: Store,
    home: Path,
    bus: EventBus,
) -> None:
    app_vm, window, entity_id = editor
    source = home / "report.txt"
    source.write_bytes(b"x" * 1000)
    app_vm.attachments.attach(str(source))
    run(app_vm.wait_idle())
    (view,) = attached(store, entity_id)
    see(run, window, "Waiting to upload")
    bus.publish(UploadProgress(view.id, entity_id, AttachmentState.UPLOADING, 450, 1000))
    see(run, window, "Uploading 45 %")
    assert find(window, "attachmentProgress_0").property("value") == pytest.approx(0.45)
    # The link goes: nothing moves now, and the tile does not pretend it does.
    bus.publish(ConnectivityChanged("unreachable", "connection refused"))
    see(run, window, "Waiting for a connection · 45 % sent")
    assert not shows(window, "Uploading")
    assert find(window, "attachmentProgress_0").property("value") == pytest.approx(0.45)
    bus.publish(ConnectivityChanged("online", ""))
    see(run, window, "Uploading 45 %")
    bus.publish(UploadProgress(view.id, entity_id, AttachmentState.UPLOADED, 1000, 1000))
    see(run, window, "Uploaded")
    assert not shows(window, "Uploading")


def test_a_large_upload_on_a_metered_link_waits_for_wifi(
    run: Runner,
    editor: tuple[AppViewModel, QQuickWindow, str],
    services: Services,
    home: Path,
) -> None:
    app_vm, window, entity_id = editor
    run(services.operations.set_sync_on_metered(False))  # the person's setting
    video = home / "walkthrough.mp4"
    with video.open("wb") as out:
        out.truncate(5 * 1024 * 1024)
    app_vm.attachments.attach(str(video))
    run(app_vm.wait_idle())
    see(run, window, "Waiting for Wi-Fi")


def test_a_large_upload_going_up_on_wifi_says_uploading_not_waiting(
    run: Runner,
    editor: tuple[AppViewModel, QQuickWindow, str],
    services: Services,
    store: Store,
    bus: EventBus,
    home: Path,
) -> None:
    app_vm, window, entity_id = editor
    run(services.operations.set_sync_on_metered(False))
    video = home / "walkthrough.mp4"
    with video.open("wb") as out:
        out.truncate(5 * 1024 * 1024)
    app_vm.attachments.attach(str(video))
    run(app_vm.wait_idle())
    (view,) = attached(store, entity_id)
    see(run, window, "Waiting for Wi-Fi")
    # The link is not metered: the engine sends it.
    bus.publish(UploadProgress(view.id, entity_id, AttachmentState.UPLOADING, view.size // 2,
                               view.size))  # fmt: skip
    see(run, window, "Uploading 50 %")
    assert not shows(window, "Waiting for Wi-Fi")


def failed_photo(run: Runner, app_vm: AppViewModel, store: Store, path: Path) -> None:
    """A photo attached in the window whose upload the server refused for good (415), as
    delivery marks it: a dead job."""
    app_vm.attachments.attach(str(photo(path)))
    run(app_vm.wait_idle())
    (job,) = store.queue.claim("test", topic=TOPIC_ATTACHMENTS)
    store.queue.dead(job, Outcome(error="content type not allowed", http_status=415))


@pytest.mark.parametrize("where", ["strip", "failed changes"])
def test_a_failed_upload_says_why_and_is_retried(
    run: Runner,
    editor: tuple[AppViewModel, QQuickWindow, str],
    store: Store,
    home: Path,
    where: str,
) -> None:
    app_vm, window, entity_id = editor
    failed_photo(run, app_vm, store, home / "Pictures" / "gasket.png")
    if where == "strip":
        app_vm.attachments.reload()
        run(app_vm.wait_idle())
        see(run, window, "Failed: content type not allowed")
        tap(run, window, "attachmentRetry_0")
        see(run, window, "Sending it again.")
        see(run, window, "Waiting to upload")
    else:  # the same actions as a refused edit
        app_vm.open("dead")
        run(app_vm.wait_idle())
        see(run, window, "gasket.png (Replace valve)")
        see(run, window, "Upload · ")
        tap(run, window, "deadRow_0")
        see(run, window, "Upload of “gasket.png (Replace valve)”")
        assert find(window, "discardButton").isVisible()
        assert not find(window, "failedForm").isVisible()  # nothing to fix in a form
        tap(run, window, "retryButton")
        see(run, window, "Sending it again.")
        see(run, window, "No failed changes.")
    (view,) = attached(store, entity_id)
    assert view.state is AttachmentState.WAITING


def test_full_screen_view_and_remove(
    run: Runner, editor: tuple[AppViewModel, QQuickWindow, str], store: Store, home: Path
) -> None:
    app_vm, window, entity_id = editor
    app_vm.attachments.attach(str(photo(home / "Pictures" / "before.png")))
    run(app_vm.wait_idle())
    tap(run, window, "attachmentThumb_0")
    run.until(lambda: find(window, "viewerCloseButton").isVisible())
    see(run, window, "before.png")
    see(run, window, "Waiting to upload · ")
    assert find(window, "viewerImage").isVisible()
    check_phone_layout(window)
    tap(run, window, "viewerRemoveButton")
    see(run, window, "has not reached the server and will not be sent")
    tap(run, window, "confirmRemoveButton")
    see(run, window, "Removed before.png.")
    run.until(lambda: not find(window, "viewerCloseButton").isVisible())
    see(run, window, "No photos or files yet.")
    assert attached(store, entity_id) == []


def test_a_new_work_order_is_saved_before_files_are_added(
    run: Runner, open_window: Open, home: Path
) -> None:
    app_vm, window = open_window(360, 720)
    app_vm.newWorkOrder()
    run(app_vm.wait_idle())
    see(run, window, "Save the work order first, then add photos and files.")
    assert not find(window, "addAttachmentButton").isEnabled()
