"""Photos and files in the installed `fieldsync-gui`, driven only by accessible names (issue 15).

The app runs as a subprocess under Xvfb with its own D-Bus session and AT-SPI bus (see
tests/e2e/desktop.py), against a real `fieldsync-server serve` behind the fault proxy of the
chaos tests: the proxy slows each upload chunk (so "Uploading N %" stays on screen long enough
to be read) and takes the link down and up. The test reads and presses what Orca would: the
work order's row, "Add photo or file", then the real Qt Quick file dialog's own list entry and
its "Open" button (nothing sets the chosen file behind the dialog's back), the tiles' words,
the full-screen view and its "Remove…", a refused file's "Failed: …" with its "Retry: …", and
the same file in the failed-changes page. The bytes on the server are checked by sha256.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from PIL import Image

from server.embedded import provision_device
from tests.chaos.plans import PASS, RequestInfo, delay
from tests.chaos.proxy import FaultProxy
from tests.e2e.desktop import Desktop, Gui, Screen, gui_marks
from tests.support.api import ServerApi
from tests.support.serve import ServerProcess

pytestmark = gui_marks()

TITLE = "Replace valve at gate 4"
#: Each chunk of an upload waits this long in the proxy: a 6 MiB PDF takes several seconds.
CHUNK_DELAY_S = 1.0


def slow_chunks(request: RequestInfo) -> Any:
    return delay(CHUNK_DELAY_S) if request.method == "PATCH" else PASS


def pictures(home: Path) -> dict[str, Path]:
    """The person's Pictures folder: a photo, a 6 MiB PDF and a text file."""
    folder = home / "Pictures"
    folder.mkdir(parents=True)
    photo = folder / "gasket-after.png"
    Image.new("RGB", (640, 480), "#58c").save(photo)
    survey = folder / "site-survey.pdf"
    survey.write_bytes(b"%PDF-1.4\n" + os.urandom(6 * 1024 * 1024))
    readings = folder / "readings.txt"
    readings.write_text("Meter 48213 kWh\n", encoding="utf-8")
    return {p.name: p for p in (photo, survey, readings)}


def choose(screen: Screen, filename: str) -> None:
    """ "Add photo or file", then the file's entry in the dialog and its "Open" button."""
    screen.reveal("Add photo or file")
    screen.click("Add photo or file")
    screen.click(filename, role="list item", timeout=30)
    screen.click("Open")


def on_server(api: ServerApi, entity_id: str) -> dict[str, dict[str, Any]]:
    """The work order's attachments on the server, by filename."""
    reply = api.client.get(f"/v1/records/{entity_id}")
    assert reply.status_code == 200, reply.text
    return {a["filename"]: a for a in reply.json()["record"].get("attachments", [])}


def test_photos_and_files_by_accessible_names(tmp_path: Path, desktop: Desktop) -> None:
    db = f"sqlite:///{tmp_path / 'server.sqlite3'}"
    # Photos and PDFs only: the text file is the one the server refuses.
    server = ServerProcess(
        db, "--rate-limit-per-second", "0", "--attachment-types", "image/*,application/pdf"
    ).start()
    port = urlsplit(server.base_url).port
    assert port is not None
    proxy = FaultProxy(("127.0.0.1", port), slow_chunks).start()
    office = ServerApi(server.base_url, provision_device(db, "office", "admin"))
    phone_token = provision_device(db, "phone-gui")
    record = office.create(title=TITLE, site="North yard", assignee="phone-gui")
    files = pictures(tmp_path / "home")
    desktop.env["HOME"] = str(tmp_path / "home")  # the dialog opens in ~/Pictures
    gui = Gui.phone(desktop, tmp_path, proxy.base_url, phone_token)
    screen: Screen | None = None
    try:
        gui.wait_running()
        screen = Screen(desktop, gui)
        screen.wait(f"{TITLE}, Synced", 60)
        screen.click(TITLE, role=None, prefix=True)
        screen.reveal("Add photo or file")
        screen.wait("No photos or files yet. They stay on this device until the server has them.")

        # Offline: a photo chosen in the dialog is kept and says what it waits for.
        proxy.link_down()
        screen.click("Sync now")
        screen.wait("Not synced: the server is unreachable.", 60)
        choose(screen, "gasket-after.png")
        added = screen.wait("Added gasket-after.png.")
        assert added == "Added gasket-after.png. It stays on this device until the server has it."
        screen.wait("Photos and files (1)")
        screen.wait("Waiting for a connection")
        assert "Uploading" not in " ".join(screen.names())
        screen.click("Back")
        screen.wait("1 attachment, 1 photo waiting")
        assert "gasket-after.png" not in on_server(office, record["id"])

        # Back online: the photo goes up; a PDF added now shows its progress, the link dies
        # in the middle, and the tile says it waits with what the server already has.
        proxy.link_up()
        screen.click(TITLE, role=None, prefix=True)
        screen.click("Sync now")
        screen.reveal("Add photo or file")
        screen.wait("Uploaded", 60)
        choose(screen, "site-survey.pdf")
        screen.wait("Photos and files (2)")
        screen.wait(re.compile(r"^Uploading [1-9]\d? %$"), 60)
        proxy.link_down()
        screen.wait(re.compile(r"^Waiting for a connection · [1-9]\d? % sent$"), 90)
        proxy.link_up()
        screen.click("Sync now")
        screen.until(
            lambda: screen.names().count("Uploaded") == 2, 120, "both tiles saying Uploaded"
        )
        held = on_server(office, record["id"])
        for name in ("gasket-after.png", "site-survey.pdf"):
            reply = office.client.get(f"/v1/attachments/{held[name]['id']}")
            assert reply.status_code == 200
            assert (
                hashlib.sha256(reply.content).hexdigest()
                == hashlib.sha256(files[name].read_bytes()).hexdigest()
            )

        # Full screen, then Remove (asked first): gone here and on the server.
        screen.click("gasket-after.png")  # the tile's picture, a button named by its file
        screen.wait("Close")
        screen.wait(re.compile(r"^Uploaded · "))
        screen.click("Remove…")
        screen.wait("Remove gasket-after.png from this work order? It is removed on the server too")
        screen.click("Remove")
        screen.wait("Removed gasket-after.png.")
        screen.wait("Photos and files (1)")
        screen.until(
            lambda: "gasket-after.png" not in on_server(office, record["id"]),
            60,
            "the photo removed on the server",
        )

        # A file the server refuses: "Failed: …" with Retry on its tile, and in Failed changes.
        choose(screen, "readings.txt")
        screen.wait("Failed: the server does not accept files of this type", 60)
        screen.wait("Retry: readings.txt")
        screen.wait(re.compile(r"^1 failed change"), 30)
        screen.click("Retry: readings.txt")
        screen.wait("Sending it again.")
        screen.wait("Failed: the server does not accept files of this type", 60)
        screen.click("Back")
        screen.wait("2 attachments, 1 file failed")
        screen.click("Menu")
        screen.click("Failed changes (1)", role="menu item")
        screen.click(f"readings.txt ({TITLE})", role=None, prefix=True)
        screen.wait(f"Upload of “readings.txt ({TITLE})”")
        screen.click("Discard…")
        screen.click("Discard")
        screen.wait("No failed changes.", 30)
    finally:
        if screen is not None:
            screen.close()
        gui.stop()
        proxy.stop()
        server.stop()
        office.close()
    assert gui.process.returncode == 0, gui.log()[-2000:]
