"""A field worker's day with the installed `fieldsync-gui`, driven only by accessible names.

The app runs as a subprocess against a real `fieldsync-server serve` process, under Xvfb with
a private D-Bus session and AT-SPI bus; the test reads and presses what Orca would (the
AT-SPI tree, through python3-pyatspi in a separate system-Python process). Online at start;
the office adds a work order and "Sync now" brings it; the server is killed and an edit is
saved (offline words, the edit not sent); the server returns (online, last synced recently,
the edit on the server); thousands of queued edits drain with "n of m" on screen.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
from pathlib import Path
from urllib.parse import urlsplit

from server.embedded import provision_device
from tests.e2e.conftest import run_cli
from tests.e2e.desktop import Desktop, Gui, Screen, gui_marks
from tests.support.api import ServerApi
from tests.support.serve import ServerProcess

pytestmark = gui_marks()

BULK = 3000


def server_has(api: ServerApi, entity_id: str, **fields: object) -> bool:
    for record in api.all_changes(limit=1000):
        if record["id"] == entity_id:
            return all(record.get(k) == v for k, v in fields.items())
    return False


def unsent_jobs(data_dir: Path, entity_id: str) -> int:
    """Edits of this work order the device still holds (read-only look at its database)."""
    uri = f"file:{data_dir / 'fieldsync.sqlite3'}?mode=ro"
    with sqlite3.connect(uri, uri=True, timeout=10) as conn:
        (count,) = conn.execute(
            "SELECT COUNT(*) FROM jobs WHERE entity_key = ? AND finished_at IS NULL",
            (entity_id,),
        ).fetchone()
    return int(count)


def test_a_field_workers_day(tmp_path: Path, desktop: Desktop) -> None:
    db = f"sqlite:///{tmp_path / 'server.sqlite3'}"
    server = ServerProcess(db, "--rate-limit-per-second", "0").start()
    port = urlsplit(server.base_url).port
    office = ServerApi(server.base_url, provision_device(db, "office", "admin"))
    phone_token = provision_device(db, "phone-gui")
    data = tmp_path / "phone"
    gui = Gui.phone(desktop, tmp_path, server.base_url, phone_token)
    screen: Screen | None = None
    try:
        gui.wait_running()
        screen = Screen(desktop, gui)

        # Online from the start: the first answer of the server ends "Connecting…".
        screen.wait("Online", 60)

        # The office adds a work order; "Sync now" brings it and says what happened.
        record = office.create(
            title="Replace valve at gate 4", site="North yard", assignee="phone-gui"
        )
        screen.click("Sync now")
        screen.wait(re.compile(r"\d+ sent, [1-9]\d* received"), 30)
        screen.wait("Replace valve at gate 4, Synced", 30)

        # The server dies; an edit is saved on the device and waits.
        os.kill(server.pid, signal.SIGKILL)
        screen.click("Replace valve at gate 4", role=None, prefix=True)
        screen.reveal("Notes")
        screen.type_text("Notes", "Gasket replaced, valve greased")
        screen.reveal("Save")
        screen.click("Save")
        screen.click("Back")  # a phone shows the list or the editor, not both
        screen.wait(re.compile(r"^Replace valve at gate 4, (Pending|Sending|Retrying|Waiting)"))
        # "Sync now" finds the server gone and says so; the status bar says it too.
        screen.click("Sync now")
        screen.wait("Not synced: the server is unreachable.", 60)
        screen.wait(re.compile(r"^(Server unreachable|Offline)$"), 30)
        assert unsent_jobs(data, record["id"]) == 1
        screen.wait(re.compile(r"^Replace valve at gate 4, (Pending|Retrying|Waiting)"), 30)

        # The server comes back on the same address: online, synced recently, edit delivered.
        server.stop()
        server = ServerProcess(db, "--rate-limit-per-second", "0", "--port", str(port)).start()
        screen.wait("Online", 120)
        screen.wait("Replace valve at gate 4, Synced", 60)
        screen.wait(re.compile(r"^Last synced (just now|\d+ s ago)$"), 30)
        assert unsent_jobs(data, record["id"]) == 0
        assert server_has(office, record["id"], notes="Gasket replaced, valve greased")

        # Thousands of edits queued at once drain with "n of m" on screen.
        bulk = tmp_path / "bulk.jsonl"
        bulk.write_text(
            "".join(
                json.dumps({"title": f"Meter reading {i:05d}", "site": "Depot 3"}) + "\n"
                for i in range(BULK)
            )
        )
        imported = run_cli(data, "import", str(bulk), token=phone_token)
        assert imported.returncode == 0, imported.stderr
        screen.click("Sync now")
        progress = screen.wait(re.compile(r"^Sending [\d,]+ of [\d,]+$"), 60)
        done, total = (int(n.replace(",", "")) for n in re.findall(r"[\d,]+", progress))
        assert 0 <= done < total
        assert total >= BULK // 10
        screen.wait("Nothing waiting to send", 300)
        delivered = sum(
            1 for r in office.all_changes(limit=1000) if r["title"].startswith("Meter reading")
        )
        assert delivered == BULK
    finally:
        if screen is not None:
            screen.close()
        gui.stop()
        server.stop()
        office.close()
    assert gui.process.returncode == 0, gui.log()[-2000:]
