"""Make the README and AppStream screenshots with the app's own --screenshot mode, from real data.

Two devices sync through an embedded server and edit the same work order, so the conflict page
shows a conflict the sync engine really captured; the app's engine syncs with that server
before each picture, so the status bar says what it would say. One more edit is marked
refused the way the engine marks a 422 (the reference server accepts every valid edit, so it
cannot be provoked), so the failed-changes page has something to show. The phone is Ana's (team
north): the office hands one of her work orders to another team while her note on it is not
delivered ("No longer assigned to you"), she keeps one of the office's offline ("Kept
offline"), and the search page shows the server's results for "check".

Every page at 360x720 and 1280x800, light and dark, goes to OUT_DIR/<size>-<theme>/<page>.png;
the AppStream ones (list, editor, conflict at 360x720, light) are copied to OUT_DIR/<page>.png.
Run: .venv/bin/python scripts/make_screenshots.py [OUT_DIR] (default resources/screenshots).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from app.attachments import Attachments
from app.events import EventBus
from app.executor import StoreExecutor
from app.store.queue import Outcome
from app.store.store import Store
from app.sync.engine import SyncConfig, SyncEngine
from app.sync.scope import Finder
from app.sync.transport import ServerClient
from server.embedded import start_server

ORDERS = [
    {"title": "Replace valve", "site": "Pump house 2", "priority": "high", "assignee": "ana"},
    {"title": "Inspect fire doors", "site": "Depot", "status": "in_progress", "team": "north"},
    {"title": "Meter reading", "site": "North yard", "assignee": "ben"},
    {"title": "Fix gate hinge", "site": "North yard", "priority": "low"},
    {"title": "Clean filter bank", "site": "Plant 1", "status": "done"},
    {"title": "Check backup generator", "site": "Hospital annex", "priority": "high"},
]
#: The office's work orders, not the phone's: found by the search page ("check").
OFFICE_ORDERS = [
    {"title": "Check hydrant pressure", "site": "Main street", "assignee": "ben", "team": "south"},
    {"title": "Check roof drains", "site": "Depot south", "assignee": "carl", "team": "south"},
    {"title": "Check pump alarms", "site": "Pump house 1", "assignee": "dana", "team": "east"},
]
SEARCH = "check"
SIZES = ["360x720", "1280x800"]
THEMES = ["light", "dark"]
APPSTREAM = ["list", "editor", "conflict"]


def sync(store: Store, url: str, token: str) -> None:
    config = SyncConfig(server_url=url, reconnect_jitter_s=0)
    engine = SyncEngine(store, config, token=lambda: token)
    if not asyncio.run(engine.run_until_idle(30)):
        raise SystemExit("sync did not finish")


def pin(store: Store, url: str, token: str, entity_id: str) -> None:
    """ "Keep offline", as the editor's switch does."""

    async def keep() -> str:
        executor = StoreExecutor()
        client = ServerClient(url, lambda: token)
        try:
            return await Finder(store, executor, client, EventBus()).pin(entity_id)
        finally:
            await client.aclose()
            executor.shutdown()

    if asyncio.run(keep()) != "sent":
        raise SystemExit("the pin did not reach the server")


_QT_APP: object = None


def photos(folder: Path) -> list[Path]:
    """Three pictures, drawn here (a meter, a gasket, a door), a plain-text note and a short
    video."""
    from ui.qt import QColor, QGuiApplication, QImage, QPainter, Qt

    global _QT_APP
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    _QT_APP = QGuiApplication.instance() or QGuiApplication(["make_screenshots"])  # for QPainter
    made = []
    for name, sky, shape in [
        ("meter-0931.jpg", "#5b7fa6", "#e8e1d0"),
        ("gasket-before.jpg", "#6b5a48", "#2b2b2b"),
        ("fire-door.jpg", "#a33b2c", "#d9d9d9"),
    ]:
        image = QImage(1200, 900, QImage.Format.Format_RGB32)
        image.fill(QColor(sky))
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(shape))
        painter.drawEllipse(300, 150, 600, 600)
        painter.setBrush(QColor("#00000040"))
        painter.drawRect(0, 700, 1200, 200)
        painter.end()
        path = folder / name
        image.save(str(path), "JPG", 85)
        made.append(path)
    note = folder / "readings.txt"
    note.write_text("Meter 0931: 48213 kWh\n", encoding="utf-8")
    # A video: the reference server accepts images, PDF, audio and text by default, so its
    # upload really fails (415) and the strip shows "Failed: …" with Retry.
    video = folder / "pump-noise.mov"
    video.write_bytes(b"\0\0\0\x14ftypqt  " + bytes(4096))
    return [*made, note, video]


def seed(tmp: Path, srv: object) -> tuple[Path, str]:
    """The phone's data dir: six synced work orders, a conflict, a pending and a failed edit,
    and photos and a file on "Meter reading" (the app's engine uploads them)."""
    phone, office = tmp / "phone", tmp / "office"
    phone_token = srv.add_device("phone-ana", user="ana", team="north")  # type: ignore[attr-defined]
    office_token = srv.add_device("office", "admin")  # type: ignore[attr-defined]
    url = srv.base_url  # type: ignore[attr-defined]
    with Store(phone) as store:
        ids = [store.record_edit("create", fields=o).entity_id for o in ORDERS]
        sync(store, url, phone_token)
    with Store(office) as store:
        sync(store, url, office_token)
        store.record_edit("update", ids[0], {"notes": "Valve ordered, do not open"})
        others = [store.record_edit("create", fields=o).entity_id for o in OFFICE_ORDERS]
        seal = {"title": "Repair pump seal", "site": "Pump house 3", "assignee": "ana"}
        handed_over = store.record_edit("create", fields={**seal, "team": "north"}).entity_id
        sync(store, url, office_token)
    with Store(phone) as store:
        sync(store, url, phone_token)
        pin(store, url, phone_token, others[0])
    with Store(office) as store:
        handover = {"notes": "Seal ordered", "assignee": "ben", "team": "south"}
        store.record_edit("update", handed_over, handover)
        sync(store, url, office_token)
    with Store(phone) as store:
        store.record_edit("update", ids[0], {"notes": "Gasket replaced, valve works"})
        store.record_edit("update", ids[2], {"notes": "Reading: 48213 kWh"})
        store.record_edit("update", handed_over, {"notes": "Seal replaced, no leak"})
        sync(store, url, phone_token)
        store.record_edit("update", ids[4], {"assignee": "Chris"})
        (job,) = store.queue.claim("screenshots")
        store.queue.dead(
            job,
            Outcome(error="validation_error: assignee: not a member of this team", http_status=422),
        )
        store.record_edit("update", ids[3], {"status": "in_progress"})
        files = Attachments(store)
        for path in photos(tmp):
            files.attach(ids[2], path)
    return phone, phone_token


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "resources/screenshots")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, start_server(f"sqlite:///{tmp}/server.db") as srv:
        phone, token = seed(Path(tmp), srv)
        # The app's own engine syncs before each picture, so the status bar shows a real state.
        env = {**os.environ, "FIELDSYNC_TOKEN": token}
        for size in SIZES:
            for theme in THEMES:
                folder = out / f"{size}-{theme}"
                folder.mkdir(exist_ok=True)
                command = [
                    sys.executable,
                    "-m",
                    "ui.main",
                    "--data-dir",
                    str(phone),
                    "--screenshot",
                    str(folder / "{page}.png"),
                    "--size",
                    size,
                    "--page",
                    "all",
                    "--server",
                    srv.base_url,
                    "--search",
                    SEARCH,
                ]
                if theme == "dark":
                    command.append("--dark")
                subprocess.run(command, check=True, env=env)
                print(folder)
    for page in APPSTREAM:
        shutil.copyfile(out / "360x720-light" / f"{page}.png", out / f"{page}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
