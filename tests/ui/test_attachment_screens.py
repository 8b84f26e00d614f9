"""Photos and files in every state, looked at: the editor's strip, the full-screen view, the
list row and the failed-changes page at a phone's size and a desktop's, light and dark.

The states are made by the real parts: uploads to the real server (in-process, port 0) by
the real engine (uploaded photo and PDF; a program the server refuses: failed), a colleague's
photo that arrives as metadata and is shown by its server thumbnail fetched on demand, then,
with the engine stopped, a photo that waits, a large video waiting for Wi-Fi (sync on metered
connections off) and a file whose upload is under way (the uploader's progress event). Each
screen is saved to test-artifacts/ and what a person reads on it is asserted: every state in
words, untruncated, nothing past the right edge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.attachments import Attachments
from app.events import EventBus, UploadProgress
from app.states import AttachmentState
from app.store.store import Store
from server.embedded import EmbeddedServer
from tests.ui.conftest import Device, Office, Open, Runner
from tests.ui.qml_driver import (
    check_phone_layout,
    find,
    polish_ancestors,
    screenshot,
    scroll_into_view,
    shown_texts,
    shows,
    walk,
)
from tests.ui.test_accessibility import accessible, nameless
from tests.ui.test_attachments_on_screen import photo, see, tap
from ui.qt import QQuickWindow
from ui.services import Services

TITLE = "Replace valve"
SIZES = [(360, 720, False), (360, 720, True), (1280, 800, False), (1280, 800, True)]


def _names(size: tuple[int, int, bool]) -> str:
    width, height, dark = size
    return f"{width}x{height}-{'dark' if dark else 'light'}"


@pytest.fixture
def every_state(
    run: Runner,
    store: Store,
    bus: EventBus,
    services: Services,
    server: EmbeddedServer,
    device: Device,
    office: Office,
    home: Path,
) -> dict[str, str]:
    """One work order of this phone with a photo or file in each state; their ids by name."""
    device.sign_in(server, "phone-1")
    entity_id = store.record_edit("create", None, {"title": TITLE}).entity_id
    files = Attachments(store)
    meter = files.attach(entity_id, photo(home / "meter-reading.png", "#3a7"))
    survey = home / "site-survey.pdf"
    survey.write_bytes(b"%PDF-1.4\n" + b"0" * 300_000)
    pdf = files.attach(entity_id, survey)
    program = home / "flow-calc.exe"
    program.write_bytes(b"MZ" + b"\0" * 2000)
    refused = files.attach(entity_id, program)
    assert run(device.engine.run_until_idle(30), 40)
    # The office adds a photo of its own: it reaches the phone as metadata only.
    office.sync()
    Attachments(office.store).attach(entity_id, photo(home / "valve-closed.png", "#c63"))
    office.sync()
    assert run(device.connect(server.base_url).run_until_idle(30), 40)  # a stopped one ends
    assert files.get(meter.id).state is AttachmentState.UPLOADED
    assert files.get(refused.id).state is AttachmentState.FAILED
    # Then, no engine: a photo waits, a large video waits for Wi-Fi, one upload is under way.
    waiting = files.attach(entity_id, photo(home / "gasket-before.png", "#58c"))
    run(services.operations.set_sync_on_metered(False))
    video = home / "walkthrough.mp4"
    with video.open("wb") as out:
        out.truncate(5 * 1024 * 1024)
    metered = files.attach(entity_id, video)
    report = home / "pressure-log.txt"
    report.write_bytes(b"bar 4.2\n" * 2000)
    uploading = files.attach(entity_id, report)
    # An engine that is not running: nothing more is sent, but the strip asks its uploader
    # for the colleague's thumbnail on demand, from the real server.
    device.connect(server.base_url)
    return {
        "entity": entity_id,
        "meter-reading.png": meter.id,
        "site-survey.pdf": pdf.id,
        "flow-calc.exe": refused.id,
        "gasket-before.png": waiting.id,
        "walkthrough.mp4": metered.id,
        "pressure-log.txt": uploading.id,
    }


def tile_words(window: QQuickWindow) -> dict[str, str]:
    """Each tile's file name (as a screen reader names it) and the state it shows."""
    found = {}
    for item in walk(window.contentItem()):
        name = item.objectName()
        if name.startswith("attachmentThumb_") and item.isVisible():
            index = name.removeprefix("attachmentThumb_")
            found[accessible(item)[1]] = find(window, f"attachmentState_{index}").property("text")
    return found


@pytest.mark.parametrize("size", SIZES, ids=_names)
def test_every_attachment_state_reads_true_on_every_screen(
    run: Runner,
    open_window: Open,
    every_state: dict[str, str],
    bus: EventBus,
    artifacts: Path,
    size: tuple[int, int, bool],
) -> None:
    width, height, dark = size
    app_vm, window = open_window(width, height, dark=dark)
    theme = _names(size)
    entity_id = every_state["entity"]
    # The list row: how many, and what waits or failed, in words.
    run.until(lambda: shows(window, TITLE))
    run.pause(0.5)
    screenshot(window, artifacts / f"attachments-list-{theme}.png")
    # In full, also beside the badge on a phone (nothing elided).
    assert shows(window, "7 · 1 photo, 2 files waiting · 1 file failed"), shown_texts(window)
    screenshot(window, artifacts / f"attachments-list-{theme}.png")

    app_vm.openWorkOrder(entity_id)
    run(app_vm.wait_idle())
    see(run, window, "Photos and files (7)")
    run.until(lambda: len(tile_words(window)) == 7, 10)
    # The uploader sends the text file's first chunk (its event, as the engine publishes it).
    bus.publish(
        UploadProgress(
            every_state["pressure-log.txt"], entity_id, AttachmentState.UPLOADING, 6400, 16000
        )
    )
    run.until(lambda: thumbnails_shown(window) == 3, 20)  # two own photos, the colleague's
    assert tile_words(window) == {
        "meter-reading.png": "Uploaded",
        "site-survey.pdf": "Uploaded",
        "flow-calc.exe": "Failed: the server does not accept files of this type",
        "valve-closed.png": "Uploaded",
        "gasket-before.png": "Waiting to upload",
        "walkthrough.mp4": "Waiting for Wi-Fi",
        "pressure-log.txt": "Uploading 40 %",
    }
    # Each tile's name and state on screen in full, once scrolled to.
    for index, (name, state) in enumerate(tile_words(window).items()):
        label = find(window, f"attachmentState_{index}")
        polish_ancestors(label)
        scroll_into_view(label)
        run.pause(0.05)
        assert shows(window, state), (name, state, shown_texts(window))
        assert (name, False) in shown_texts(window), f"{name}: {shown_texts(window)}"
        check_phone_layout(window)
    assert nameless(window) == []
    assert accessible(find(window, "attachmentRetry_2"))[1] == "Retry: flow-calc.exe"
    screenshot(window, artifacts / f"attachments-strip-end-{theme}.png")  # scrolled to the last
    scroll_to(run, window, "attachmentsHeading")
    screenshot(window, artifacts / f"attachments-strip-{theme}.png")

    # Full screen: the colleague's photo by its thumbnail, and the PDF by name and size.
    for name, state in (("valve-closed.png", "Uploaded · "), ("site-survey.pdf", "Uploaded · ")):
        index = list(tile_words(window)).index(name)
        tap(run, window, f"attachmentThumb_{index}")
        run.until(lambda: find(window, "viewerCloseButton").isVisible())
        run.pause(0.3)
        see(run, window, name)
        see(run, window, state)
        if name.endswith(".png"):
            run.until(lambda: find(window, "viewerImage").property("paintedWidth") > 0, 10)
        else:
            see(run, window, "File, 293.0 KB")
        check_phone_layout(window)
        assert nameless(window) == []
        screenshot(window, artifacts / f"attachment-viewer-{name.split('.')[-1]}-{theme}.png")
        tap(run, window, "viewerCloseButton")
        run.until(lambda: not find(window, "viewerCloseButton").isVisible())

    # The refused file among the failed changes, with the same actions as an edit.
    app_vm.open("dead")
    run(app_vm.wait_idle())
    see(run, window, f"flow-calc.exe ({TITLE})")
    tap(run, window, "deadRow_0")
    see(run, window, f"Upload of “flow-calc.exe ({TITLE})”")
    see(run, window, "Refused by the server")  # what kind of failure, not "Other"
    see(run, window, "The server refused the file. (the server does not accept files of this")
    check_phone_layout(window)
    screenshot(window, artifacts / f"attachments-failed-{theme}.png")


def thumbnails_shown(window: QQuickWindow) -> int:
    return sum(
        1
        for item in walk(window.contentItem())
        if item.objectName().startswith("attachmentImage_") and item.isVisible()
    )


def scroll_to(run: Runner, window: QQuickWindow, name: str) -> None:
    """The page scrolled so that `name` is at its top (as a person would look at the strip)."""
    item = find(window, name)
    flick: Any = item.parentItem()
    while flick is not None and "Flickable" not in flick.metaObject().className():
        flick = flick.parentItem()
    if flick is None:
        return
    top = item.mapToItem(flick.property("contentItem"), 0, 0).y() - 8
    most = max(0.0, float(flick.property("contentHeight")) - flick.height())
    flick.setProperty("contentY", min(most, max(0.0, top)))
    run.pause(0.2)
    assert any(text.startswith("Photos and files") for text, _ in shown_texts(window))
