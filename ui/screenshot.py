"""`fieldsync-gui --screenshot`: render pages offscreen to PNG files and exit.

With `--server URL` (token from FIELDSYNC_TOKEN or the keyring) the real sync engine runs
first, so the status bar shows what a person would see (online, last synced) instead of
"Sync is not running"; scripts/make_screenshots.py uses that for the README's pictures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from typing import Any

from app.events import EventBus
from app.executor import StoreExecutor
from app.states import Connectivity
from app.store.store import Store
from ui.bridge import Bridge
from ui.qt import QQmlApplicationEngine, QQuickItem
from ui.services import Services
from ui.viewmodels.app import PAGES, AppViewModel
from ui.window import load_window

__all__ = ["SHOTS", "show_page", "take_screenshots"]

#: Every picture `--page` can take: each page, then the editor's photos and files (scrolled to
#: its strip) and one of them full screen.
SHOTS = (*PAGES, "attachments", "attachment")

#: How long the engine may take to reach the server and go quiet before the pictures.
SETTLE_S = 20.0


async def show_page(app_vm: AppViewModel, page: str, search: str = "") -> None:
    """Navigate to `page` with something on it: the first work order, the first conflict,
    the server's results for `search` (when the search can run); for "attachments" and
    "attachment" the first work order with photos or files."""
    if page in ("attachments", "attachment"):
        rows = [app_vm.workOrders.get(i) for i in range(app_vm.workOrders.rowCount())]
        with_files = [row for row in rows if row["attachmentCount"]] or rows[:1]
        if with_files:
            app_vm.openWorkOrder(with_files[0]["entityId"])
        await app_vm.wait_idle()
        first = app_vm.attachments.get(0)
        if page == "attachment" and first:
            app_vm.attachments.openViewer(first["attachmentId"])
    elif page == "editor":
        first = app_vm.workOrders.get(0)
        if first:
            app_vm.openWorkOrder(first["entityId"])
        else:
            app_vm.newWorkOrder()
    elif page == "conflict":
        await app_vm.conflicts.wait_idle()
        app_vm.open("conflict")
        await app_vm.conflicts.wait_idle()
        conflicts = app_vm.conflicts.openConflicts
        if conflicts:
            app_vm.conflicts.openJob(conflicts[0]["jobId"])
    else:
        app_vm.open(page)
        if page == "search" and search and app_vm.search.canSearch:
            app_vm.search.setQuery(search)
            app_vm.search.search()
    await app_vm.wait_idle()


def _engine(
    args: argparse.Namespace, store: Store, bus: EventBus, executor: StoreExecutor
) -> tuple[Any, Any]:
    """The real engine and a server client for --server (token: FIELDSYNC_TOKEN or keyring)."""
    from app.credentials import get_token
    from app.sync.engine import SyncConfig, SyncEngine
    from app.sync.transport import ServerClient

    token = get_token(args.server)
    config = SyncConfig(server_url=args.server, reconnect_jitter_s=0)
    engine = SyncEngine(store, config, bus, token=lambda: token, executor=executor)
    return engine, ServerClient(args.server, lambda: token)


async def _settle(app_vm: AppViewModel) -> None:
    """Until the status bar says online and nothing is moving (or SETTLE_S passed)."""
    deadline = time.monotonic() + SETTLE_S
    status = app_vm.status
    while time.monotonic() < deadline:
        if status.connectivity == Connectivity.ONLINE and not status.syncing:
            break
        await asyncio.sleep(0.1)
    await app_vm.wait_idle()


async def take_screenshots(args: argparse.Namespace, store: Store, executor: StoreExecutor) -> int:
    bus = EventBus()
    bridge = Bridge()
    bridge.attach(bus)
    engine, review_client = _engine(args, store, bus, executor) if args.server else (None, None)
    finder = None
    if review_client is not None:
        from app.sync.scope import Finder

        finder = Finder(store, executor, review_client, bus)
    services = Services(
        store=store,
        executor=executor,
        bridge=bridge,
        engine=engine,
        server_url=args.server or "",
        review_client=review_client,
        finder=finder,
    )
    app_vm = AppViewModel(services)
    qml = QQmlApplicationEngine()
    window = load_window(
        qml,
        app_vm,
        args.width,
        args.height,
        dark=args.dark or None,
        high_contrast=args.high_contrast,
    )
    app_vm.start()
    sync_task = asyncio.create_task(engine.run(), name="sync-engine") if engine else None
    failed = []
    try:
        if engine is not None:
            await _settle(app_vm)
        await app_vm.wait_idle()
        pages = list(SHOTS) if args.page == "all" else [args.page]
        for page in pages:
            await show_page(app_vm, page, args.search)
            await asyncio.sleep(0.3)  # let the scene graph lay out the loaded page
            if page == "attachments":
                _scroll_to(window, "attachmentsHeading")
                await asyncio.sleep(0.2)
            target = str(args.screenshot).replace("{page}", page)
            if not window.grabWindow().save(target):
                failed.append(target)
            app_vm.attachments.closeViewer()
            app_vm.open("list")
    finally:
        if engine is not None and sync_task is not None:
            await engine.stop()
            sync_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sync_task
        await app_vm.aclose()
        if review_client is not None:
            await review_client.aclose()
        window.close()
        del qml
        bridge.detach()
    if failed:
        print(f"fieldsync-gui: could not write {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _scroll_to(window: Any, name: str) -> None:
    """Scroll the page holding the item called `name` so that it is at the top."""
    item = window.findChild(QQuickItem, name)
    flick = item.parentItem() if item is not None else None
    while flick is not None and "Flickable" not in flick.metaObject().className():
        flick = flick.parentItem()
    if item is None or flick is None:
        return
    top = item.mapToItem(flick.property("contentItem"), 0, 0).y() - 8
    most = max(0.0, float(flick.property("contentHeight")) - flick.height())
    flick.setProperty("contentY", min(most, max(0.0, top)))
