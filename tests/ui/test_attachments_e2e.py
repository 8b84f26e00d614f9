"""A photo from the window to the server: chosen in the real file dialog, attached through the
real core, uploaded by the real sync engine over tus to the real server (in-process, port 0),
and the strip says so. A file the server refuses fails on screen, with Retry, and in the
failed-changes panel.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from app.attachments import Attachments
from app.store.store import Store
from server.embedded import EmbeddedServer
from tests.ui.conftest import Device, Office, Open, Runner
from tests.ui.qml_driver import click, find, shows, texts_shown, walk
from tests.ui.test_attachments_on_screen import choose_in_dialog, photo, see
from ui.qt import QQuickWindow
from ui.viewmodels.app import AppViewModel


@dataclass
class Online:
    """The window at a phone's size, its engine syncing with the real server, and the
    editor open on a work order that was created on this device."""

    app_vm: AppViewModel
    window: QQuickWindow
    entity_id: str
    token: str


@pytest.fixture
def online(
    run: Runner,
    store: Store,
    server: EmbeddedServer,
    device: Device,
    open_window: Open,
    home: Path,
) -> Online:
    token = device.sign_in(server, "phone-1")
    entity_id = store.record_edit("create", None, {"title": "Replace valve"}).entity_id
    app_vm, window = open_window(360, 720)
    device.start()
    app_vm.openWorkOrder(entity_id)
    run(app_vm.wait_idle())
    return Online(app_vm, window, entity_id, token)


def test_a_photo_goes_from_the_dialog_to_the_server_and_says_uploaded(
    run: Runner, online: Online, server: EmbeddedServer, home: Path
) -> None:
    app_vm, window, token = online.app_vm, online.window, online.token
    source = photo(home / "Pictures" / "gasket-after.png", "#58c")
    click(window, find(window, "addAttachmentButton"))
    choose_in_dialog(run, window, "gasket-after.png")
    see(run, window, "Added gasket-after.png.")
    see(run, window, "Uploaded", timeout=30)

    # The server has exactly these bytes under the attachment's id.
    attachment_id = app_vm.attachments.get(0)["attachmentId"]
    reply = httpx.get(
        f"{server.base_url}/v1/attachments/{attachment_id}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert reply.status_code == 200
    assert (
        hashlib.sha256(reply.content).hexdigest() == hashlib.sha256(source.read_bytes()).hexdigest()
    )

    # The list row counts it, and nothing waits any more.
    app_vm.back()
    run(app_vm.wait_idle())
    see(run, window, "Replace valve")
    # (Repainted a moment after the upload ended: rows repaint once per burst of events.
    # Until then the row's count is hidden, and `find` of a hidden row item fails at once
    # instead of waiting.)
    run.until(lambda: count_shown(window, "1"), 20)
    assert not shows(window, "photo waiting")


def test_a_file_the_server_refuses_fails_on_screen_and_in_failed_changes(
    run: Runner, online: Online, home: Path
) -> None:
    app_vm, window = online.app_vm, online.window
    program = home / "tool.exe"
    program.write_bytes(b"MZ" + b"\0" * 2000)
    app_vm.attachments.attach(str(program))
    # The server's 415, in the core's words, on the tile.
    see(run, window, "Failed: the server does not accept files of this type", timeout=30)
    assert find(window, "attachmentRetry_0").isVisible()
    # The status bar counts it with the failed changes that need the person.
    see(run, window, "1 failed change", timeout=10)

    app_vm.open("dead")
    run(app_vm.wait_idle())
    see(run, window, "tool.exe (Replace valve)")
    # The list row does not call it waiting.
    app_vm.back()
    see(run, window, "1 · 1 file failed")
    # Beside it the badge says which part synced, not a plain "Synced" (issue 24).
    see(run, window, "Details synced")
    assert "Synced" not in texts_shown(window)
    assert app_vm.workOrders.get(0)["badgeDetail"].startswith(
        "The server has every change to this work order's details, but 1 file did not upload."
    )


def thumbnail_shown(window: QQuickWindow) -> bool:
    return any(
        item.objectName() == "attachmentImage_0" and item.isVisible()
        for item in walk(window.contentItem())
    )


def test_a_colleagues_photo_shows_its_thumbnail_from_the_server(
    run: Runner, online: Online, office: Office, home: Path
) -> None:
    app_vm, window = online.app_vm, online.window
    # The office attaches a photo to the same work order once the phone's create is there.
    run.until(lambda: not app_vm.editor.unsynced, 20)
    office.sync(30)
    Attachments(office.store).attach(online.entity_id, photo(home / "valve-closed.png", "#c63"))
    office.sync(30)
    app_vm.status.syncNow()
    see(run, window, "valve-closed.png", timeout=20)
    # Not on this device: the tile shows the server's thumbnail, fetched on demand.
    run.until(lambda: thumbnail_shown(window), 20)
    see(run, window, "Uploaded")


def test_the_list_row_counts_a_colleagues_photo_after_a_pull(
    run: Runner, online: Online, office: Office, home: Path
) -> None:
    app_vm, window = online.app_vm, online.window
    run.until(lambda: not app_vm.editor.unsynced, 20)
    app_vm.back()
    run(app_vm.wait_idle())
    see(run, window, "Replace valve")
    assert not count_shown(window, "1"), "no attachment yet"
    office.sync(30)
    Attachments(office.store).attach(online.entity_id, photo(home / "valve-closed.png", "#c63"))
    office.sync(30)
    # The photo leaves the work order's version alone; the pull names it, and the row repaints.
    app_vm.status.syncNow()
    run.until(lambda: count_shown(window, "1"), 20)


def count_shown(window: QQuickWindow, text: str) -> bool:
    """A list row's attachment count says ``text`` on screen."""
    return any(
        item.objectName() == "attachmentCountText"
        and item.isVisible()
        and item.property("text") == text
        for item in walk(window.contentItem())
    )
