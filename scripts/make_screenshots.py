"""Make the AppStream screenshots with the app's own --screenshot mode, from real data.

Two devices sync through an embedded server and edit the same work order, so the conflict
page shows a conflict the sync engine really captured. Run: .venv/bin/python
scripts/make_screenshots.py [OUT_DIR] (default resources/screenshots).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

from app.store.store import Store
from app.sync.engine import SyncConfig, SyncEngine
from server.embedded import start_server

ORDERS = [
    {"title": "Replace valve", "site": "Pump house 2", "priority": "high", "assignee": "Ana"},
    {"title": "Inspect fire doors", "site": "Depot north", "status": "in_progress"},
    {"title": "Meter reading", "site": "North yard", "assignee": "Ben"},
    {"title": "Fix gate hinge", "site": "North yard", "priority": "low"},
    {"title": "Clean filter bank", "site": "Plant 1", "status": "done"},
    {"title": "Check backup generator", "site": "Hospital annex", "priority": "high"},
]


def sync(store: Store, url: str, token: str) -> None:
    config = SyncConfig(server_url=url, reconnect_jitter_s=0)
    engine = SyncEngine(store, config, token=lambda: token)
    if not asyncio.run(engine.run_until_idle(30)):
        raise SystemExit("sync did not finish")


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "resources/screenshots")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, start_server(f"sqlite:///{tmp}/server.db") as srv:
        phone, office = Path(tmp) / "phone", Path(tmp) / "office"
        phone_token, office_token = srv.add_device("phone-ana"), srv.add_device("office")
        with Store(phone) as store:
            ids = [store.record_edit("create", fields=o).entity_id for o in ORDERS]
            sync(store, srv.base_url, phone_token)
        with Store(office) as store:
            sync(store, srv.base_url, office_token)
            store.record_edit("update", ids[0], {"notes": "Valve ordered, do not open"})
            sync(store, srv.base_url, office_token)
        with Store(phone) as store:
            store.record_edit("update", ids[0], {"notes": "Gasket replaced, valve works"})
            store.record_edit("update", ids[2], {"notes": "Reading: 48213 kWh"})
            sync(store, srv.base_url, phone_token)
            store.record_edit("update", ids[3], {"status": "in_progress"})
        for page in ("list", "editor", "conflict"):
            target = out / f"{page}.png"
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ui.main",
                    "--data-dir",
                    str(phone),
                    "--screenshot",
                    str(target),
                    "--size",
                    "360x720",
                    "--page",
                    page,
                ],
                check=True,
            )
            print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
