"""`fieldsync-gui`: the Qt app on a qasync loop, with the sync engine and (by default) an
embedded local server; or `--screenshot FILE` to render one page offscreen and exit.

    fieldsync-gui [--data-dir DIR] [--server URL] [--size WxH] [--dark] [--high-contrast]
                  [--open conflict:ID|dead|editor:ID|signin|...] [--no-samples]
    fieldsync-gui --screenshot FILE [--size 360x720] [--page list|editor|attachments|...|all]
                  [--search TEXT]

With `--page all`, FILE names each page with `{page}` (`shots/{page}.png`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.desktop.network import NetworkWatch
from app.desktop.notifications import Notifier, load_notifications_enabled
from app.desktop.sleep import SleepGuard
from app.events import EventBus
from app.executor import StoreExecutor
from app.samples import add_samples
from app.store.db import default_data_dir
from app.store.errors import StoreError
from app.store.store import Store
from ui import crash
from ui.bridge import Bridge
from ui.embedded import (
    EmbeddedServerUnavailable,
    embedded_person,
    is_first_run,
    start_embedded_server,
)
from ui.qt import QApplication, QNetworkInformation, QQmlApplicationEngine, connect
from ui.screenshot import SHOTS, show_page, take_screenshots
from ui.services import Services
from ui.single_instance import SingleInstance
from ui.viewmodels.app import AppViewModel
from ui.viewmodels.settings import load_sync_on_metered
from ui.window import load_window, set_style

__all__ = ["main", "show_page"]

log = logging.getLogger("fieldsync.gui")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="fieldsync-gui", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="device data directory (default: XDG data dir)")
    parser.add_argument("--server", help="sync with this server instead of an embedded one")
    parser.add_argument("--dark", action="store_true", help="use a dark palette")
    parser.add_argument(
        "--high-contrast", action="store_true", help="black on white (white on black with --dark)"
    )
    parser.add_argument("--screenshot", metavar="FILE", help="render a page to FILE and exit")
    parser.add_argument(
        "--size", help="window size, WxH (default: 1280x800; 360x720 with --screenshot)"
    )
    parser.add_argument(
        "--page", default="list", choices=[*sorted(SHOTS), "all"], help="page to render"
    )
    parser.add_argument(
        "--search", default="", help="with --screenshot: what the search page asks the server"
    )
    parser.add_argument(
        "--no-samples",
        action="store_true",
        help="on the embedded server's first run, start empty (no sample work orders)",
    )
    parser.add_argument(
        "--open",
        metavar="TARGET",
        default="",
        help="open this page at start (a notification's action: conflict:ID, dead, signin…)",
    )
    args = parser.parse_args(argv)
    if args.screenshot and args.page == "all" and "{page}" not in args.screenshot:
        parser.error("--page all needs {page} in the --screenshot file name")
    if args.size is None:
        args.size = "360x720" if args.screenshot else "1280x800"
    try:
        width, height = (int(n) for n in args.size.lower().split("x"))
    except ValueError:
        parser.error(f"--size takes WIDTHxHEIGHT, got {args.size!r}")
    args.width, args.height = width, height
    return args


class TokenHolder:
    """The device token for the running engine; replaced when the person signs in again."""

    def __init__(self, token: str = "") -> None:
        self.token = token

    def __call__(self) -> str:
        return self.token


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.screenshot:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        os.environ.setdefault("QT_QUICK_BACKEND", "software")
    from qasync import QEventLoop

    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication([sys.argv[0]])
    app.setApplicationName("Fieldsync")
    app.setDesktopFileName("io.github.fieldsync.Fieldsync")
    set_style()
    loop = QEventLoop(app)
    asyncio.set_event_loop(loop)
    crash.install(loop)
    data_dir = Path(args.data_dir) if args.data_dir else default_data_dir()
    instance = SingleInstance(data_dir)
    if not args.screenshot and not instance.acquire():
        return _show_running(instance, args.open)
    try:
        store = Store(data_dir)
    except StoreError as exc:
        print(f"fieldsync-gui: {exc}", file=sys.stderr)
        instance.release()
        return 1
    executor = StoreExecutor()
    try:
        code: int
        if args.screenshot:
            code = loop.run_until_complete(take_screenshots(args, store, executor))
        else:
            code = loop.run_until_complete(_run(app, args, store, executor, instance))
        return code
    except EmbeddedServerUnavailable as exc:
        print(f"fieldsync-gui: {exc}", file=sys.stderr)
        return 2
    finally:
        instance.release()
        executor.shutdown()
        store.close()
        asyncio.set_event_loop(None)
        with contextlib.suppress(RuntimeError):
            loop.close()


def _show_running(instance: SingleInstance, target: str) -> int:
    """Another start runs on this data directory: show its window (at `target`) instead."""
    if instance.forward(target):
        print(f"fieldsync-gui: already running on {instance.data_dir}; showed its window")
        return 0
    print(
        f"fieldsync-gui: another fieldsync-gui (process {instance.holder()}) holds "
        f"{instance.data_dir} and did not answer; close it, or start with another --data-dir",
        file=sys.stderr,
    )
    return 3


async def _run(
    app: QApplication,
    args: argparse.Namespace,
    store: Store,
    executor: StoreExecutor,
    instance: SingleInstance,
) -> int:
    from app.credentials import CredentialsError, get_token
    from app.sync.engine import SyncConfig, SyncEngine
    from app.sync.scope import Finder
    from app.sync.transport import ServerClient

    bus = EventBus()
    bridge = Bridge()
    bridge.attach(bus)
    server: Any = None
    holder = TokenHolder()
    if args.server:
        url = args.server
        try:
            holder.token = await executor.run(get_token, url)
        except CredentialsError as exc:
            log.warning("no token yet: %s", exc)
    else:
        first_run = is_first_run(store.data_dir)
        server, holder.token = await start_embedded_server(store.data_dir, executor)
        url = server.base_url
        log.info("embedded sync server on %s", url)
        if first_run and not args.no_samples:
            await _add_samples(store, executor, holder.token)

    sync_on_metered = await executor.run(load_sync_on_metered, store)
    config = SyncConfig(server_url=url, sync_on_metered=sync_on_metered)
    engine = SyncEngine(store, config, bus, token=holder, executor=executor)
    review_client = ServerClient(url, holder)
    services = Services(
        store=store,
        executor=executor,
        bridge=bridge,
        engine=engine,
        server_url=url,
        review_client=review_client,
        finder=Finder(store, executor, review_client, bus),
    )

    def on_signed_in(server_url: str, token: str) -> None:
        holder.token = token
        engine.resume_after_sign_in()

    app_vm = AppViewModel(services, on_signed_in=on_signed_in)
    qml = QQmlApplicationEngine()
    size, dark = (args.width, args.height), args.dark or None
    window = load_window(qml, app_vm, *size, dark=dark, high_contrast=args.high_contrast)
    app_vm.start()
    os_tasks = desktop_watchers(engine, bus, qt_network=_watch_network(engine))
    if not holder.token:
        app_vm.open("signin")
    elif args.open:
        app_vm.openTarget(args.open)
    notifier = desktop_notifier(store, executor, bus, app_vm, window)
    instance.serve(lambda target: show_window(app_vm, window, target))

    closed = asyncio.Event()
    app.setQuitOnLastWindowClosed(False)
    connect(app.lastWindowClosed, closed.set)
    connect(app.aboutToQuit, closed.set)
    stop_on_signals(closed)
    sync_task = asyncio.create_task(engine.run(), name="sync-engine")
    os_tasks.append(asyncio.create_task(notifier.run(), name="notifications"))
    log.info("fieldsync-gui running (data dir %s)", store.data_dir)
    try:
        await closed.wait()
    finally:
        log.info("stopping: finishing in-flight changes")
        await engine.stop()
        if not sync_task.done():
            sync_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sync_task
        for task in os_tasks:
            task.cancel()
        await asyncio.gather(*os_tasks, return_exceptions=True)
        await app_vm.aclose()
        await review_client.aclose()
        window.close()
        del qml
        bridge.detach()
        if server is not None:
            await asyncio.to_thread(server.stop)
        log.info("fieldsync-gui stopped")
    return 0


async def _add_samples(store: Store, executor: StoreExecutor, token: str) -> None:
    """A first run shows the product: sample work orders for this device's person."""
    person, team = await asyncio.to_thread(embedded_person, store.data_dir, token)
    try:
        added = await executor.run(add_samples, store, person, team)
    except StoreError as exc:
        log.warning("no sample work orders: %s", exc)
        return
    log.info("added %d sample work orders (remove them in Settings)", len(added))


def desktop_notifier(
    store: Store, executor: StoreExecutor, bus: EventBus, app_vm: Any, window: Any
) -> Notifier:
    """Notifications of what needs the person; an action shows the window on its page."""

    async def enabled() -> bool:
        return await executor.run(load_notifications_enabled, store)

    notifier = Notifier(
        enabled=enabled, on_action=lambda target: show_window(app_vm, window, target)
    )
    notifier.subscribe(bus)
    return notifier


def show_window(app_vm: Any, window: Any, target: str) -> None:
    """Bring the window up at `target` (a notification's action, or another start's)."""
    if target:
        app_vm.openTarget(target)
    window.show()
    # Not raise(): Wayland compositors (a phone's) refuse it; activation is the request.
    window.requestActivate()


def stop_on_signals(closed: asyncio.Event) -> None:
    """SIGTERM (a session logging out, systemd, Plasma Mobile closing the app) and SIGINT
    (Ctrl+C) end the app like closing its window: the engine releases its leases and the
    embedded server shuts down. qasync's loop watches the signal wake-up fd, so a signal is
    seen at once even while Qt sits in its own event loop."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(signum, _on_signal, signum, closed)
        except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover - not Unix
            log.warning("cannot watch %s; close the window to stop", signum.name)


def _on_signal(signum: signal.Signals, closed: asyncio.Event) -> None:
    log.info("received %s", signum.name)
    closed.set()


def desktop_watchers(engine: Any, bus: EventBus, *, qt_network: bool) -> list[asyncio.Task[Any]]:
    """Sleep and wake through logind, and NetworkManager where Qt has no network backend."""
    guard = SleepGuard(engine)
    guard.subscribe(bus)
    tasks = [asyncio.create_task(guard.run(), name="sleep-guard")]
    if not qt_network:
        tasks.append(asyncio.create_task(NetworkWatch(engine).run(), name="network-manager"))
    return tasks


def _watch_network(engine: Any) -> bool:
    """Feed the OS's view of the network to the engine as a hint. False: Qt has no backend
    here (NetworkManager over D-Bus, or the server probe alone, then)."""
    if QNetworkInformation is None or not QNetworkInformation.loadDefaultBackend():
        log.info("no Qt network information backend; asking NetworkManager")
        return False
    info = QNetworkInformation.instance()
    if info is None:
        return False
    reach = QNetworkInformation.Reachability

    def on_network_changed(*_: object) -> None:
        value = info.reachability()
        online = None if value == reach.Unknown else value == reach.Online
        engine.set_os_hint(online, bool(info.isMetered()))

    connect(info.reachabilityChanged, on_network_changed)
    connect(info.isMeteredChanged, on_network_changed)
    on_network_changed()
    return True


if __name__ == "__main__":
    raise SystemExit(main())
