"""Fixtures for the Qt app tests: offscreen Qt, a qasync loop, a real store in a temp dir, and
the real server (in-process, port 0) with this device's engine and an office device."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_QUICK_BACKEND", "software")

import pytest  # noqa: E402
import shiboken6  # noqa: E402

from app.events import EventBus  # noqa: E402
from app.executor import StoreExecutor  # noqa: E402
from app.states import Reason  # noqa: E402
from app.store.queue import Outcome  # noqa: E402
from app.store.store import Store  # noqa: E402
from app.sync.connectivity import ConnectivityConfig  # noqa: E402
from app.sync.engine import SyncConfig, SyncEngine  # noqa: E402
from app.sync.scope import Finder  # noqa: E402
from app.sync.transport import ServerClient, TransportConfig  # noqa: E402
from server.embedded import EmbeddedServer, start_server  # noqa: E402
from ui.bridge import Bridge  # noqa: E402
from ui.qt import (
    QEventLoopFlags,  # noqa: E402
    QObject,  # noqa: E402
    QTimer,  # noqa: E402
)
from ui.services import Services  # noqa: E402
from ui.window import set_style  # noqa: E402

set_style()  # the app's Qt Quick style, before any QML engine exists

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


class Runner:
    """Runs coroutines on the qasync loop that drives Qt, as the app does.

    The loop is marked running for the whole test (qasync's ``already_running``), so Qt events
    processed anywhere (QTest clicks, qtbot waits) run asyncio callbacks with a running loop,
    exactly as under ``app.exec()`` in the real program.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, qapp: Any) -> None:
        self.loop = loop
        self.qapp = qapp

    def __call__(self, coro: Coroutine[Any, Any, Any], timeout: float = 10.0) -> Any:
        future = asyncio.ensure_future(coro, loop=self.loop)
        deadline = time.monotonic() + timeout
        while not future.done():
            if time.monotonic() > deadline:
                future.cancel()
                raise TimeoutError(f"{coro!r} did not finish in {timeout} s")
            self.qapp.processEvents(QEventLoopFlags.AllEvents, 20)
            time.sleep(0.001)
        return future.result()

    def until(self, condition: Callable[[], bool], timeout: float = 5.0) -> None:
        async def wait() -> None:
            while not condition():  # noqa: ASYNC110 - polls a Qt-side condition
                await asyncio.sleep(0.01)

        self(wait(), timeout)

    def pause(self, seconds: float) -> None:
        self(asyncio.sleep(seconds), seconds + 5)


def consume_exit_request(qapp: Any) -> None:
    """WORKAROUND: qasync's `stop()` of a loop marked running calls `QApplication.exit()`
    with no Qt event loop running. Qt then refuses every later local event loop until the
    application's own `exec()` has run once: each modal dialog's `exec()` (the crash
    dialog of a later test) returned at once, unseen. One empty `exec()` resets it."""
    QTimer.singleShot(0, qapp, qapp.quit)
    qapp.exec()


@pytest.fixture
def run(qapp: Any) -> Iterator[Runner]:
    from qasync import QEventLoop

    loop = QEventLoop(qapp, already_running=True)
    asyncio.set_event_loop(loop)
    runner = Runner(loop, qapp)
    try:
        yield runner
    finally:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            runner(asyncio.gather(*pending, return_exceptions=True))
        loop.stop()
        consume_exit_request(qapp)
        asyncio.events._set_running_loop(None)
        asyncio.set_event_loop(None)
        loop.close()
        # WORKAROUND: collect this test's garbage now, on the Qt thread, between tests. Left
        # to a later automatic collection, a wrapper of a Qt object (a socket notifier of the
        # closed loop, a view-model) could be freed in the middle of another test's event
        # processing, which crashed PySide6 6.12 with a segmentation fault.
        gc.collect()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "data", synchronous="NORMAL") as opened:
        yield opened


@pytest.fixture
def executor() -> Iterator[StoreExecutor]:
    pool = StoreExecutor()
    yield pool
    pool.shutdown()


@pytest.fixture
def bus() -> EventBus:
    return EventBus()


@pytest.fixture
def services(store: Store, executor: StoreExecutor, bus: EventBus, qapp: Any) -> Iterator[Services]:
    bridge = Bridge()
    bridge.attach(bus)
    yield Services(store=store, executor=executor, bridge=bridge)
    bridge.detach()


@pytest.fixture
def root(qapp: Any) -> Iterator[QObject]:
    """Parent of the view-models under test, deleted on the Qt thread at teardown.

    Left to the garbage collector, a view-model could be freed on the executor thread, and Qt
    refuses to stop its timers there.
    """
    parent = QObject()
    yield parent
    shiboken6.delete(parent)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The person's home with a Pictures folder (where the dialog opens)."""
    home = tmp_path / "home"
    (home / "Pictures").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


def add_orders(store: Store, count: int, **fields: Any) -> list[str]:
    """Create `count` work orders as if pulled from the server (synced, no pending jobs)."""
    ids = store.import_records(
        {"title": f"Pump check {i:05d}", "site": f"Site {i % 7}", **fields} for i in range(count)
    )
    mark_synced(store)
    return ids


def mark_synced(store: Store) -> None:
    """Acknowledge every pending job, as a server that accepted them all would."""
    now = time.time()
    while True:
        jobs = store.queue.claim("test", limit=500)
        if not jobs:
            break
        store.queue.ack_many([(job, Outcome(), 1) for job in jobs])
    store.db.execute_sql(
        "UPDATE work_orders SET origin = 'server', server_version = 1, last_synced_at = ?", (now,)
    )


def make_dead(
    store: Store,
    title: str = "Broken pump",
    error: str = "",
    status: int = 422,
    code: Reason = Reason.INVALID,
) -> int:
    """One dead job: an edit the server refused (``code`` says why, as delivery records it)."""
    entity_id = str(uuid.uuid4())
    result = store.record_edit("create", entity_id, {"title": title, "site": "North yard"})
    (job,) = store.queue.claim("test")
    error = error or "validation_error: site: not a known site"
    store.queue.dead(job, Outcome(error=error, http_status=status, code=code))
    return result.job_id


def make_conflict(store: Store, title: str = "Replace valve") -> tuple[str, int]:
    """A work order edited here and on the server: notes overlap, site merged by itself."""
    from app.sync.merge import conflict_hold, three_way

    (entity_id,) = store.import_records([{"id": str(uuid.uuid4()), "title": title}])
    mark_synced(store)
    store.record_edit("update", entity_id, {"notes": "Gasket replaced", "site": "Pump house 2"})
    (job,) = store.queue.claim("test")
    base = {"title": title, "site": "", "notes": "", "status": "open", "priority": "normal"}
    mine = {"notes": "Gasket replaced", "site": "Pump house 2"}
    server = {
        **base,
        "notes": "Valve ordered, do not open",
        "priority": "high",
        "assignee": "",
        "due_date": None,
        "deleted": False,
        "id": entity_id,
        "version": 2,
        "updated_by": "dispatcher-anna",
        "updated_at": "2026-11-29T08:15:00Z",
    }
    with store.db.atomic():
        hold = conflict_hold(entity_id, "update", mine, base, server, three_way(base, mine, server))
        store.queue.open_conflict(job.id, hold)
    store.queue.conflict(job, Outcome(error="version_conflict", http_status=409))
    return entity_id, job.id


Open = Callable[..., tuple[Any, Any]]


@pytest.fixture
def open_window(run: Runner, services: Services, root: Any, qapp: Any) -> Iterator[Open]:
    """Open the real QML window over fresh view-models: open_(width, height, dark)."""
    from ui.qt import QPalette, QQmlApplicationEngine
    from ui.viewmodels.app import AppViewModel
    from ui.window import load_window

    opened: list[tuple[Any, Any, Any]] = []

    def open_(
        width: int = 360, height: int = 720, dark: bool = False, high_contrast: bool = False
    ) -> tuple[Any, Any]:
        app_vm = AppViewModel(services, root)
        engine = QQmlApplicationEngine()
        window = load_window(engine, app_vm, width, height, dark=dark, high_contrast=high_contrast)
        app_vm.start()
        run(app_vm.wait_idle())
        opened.append((app_vm, engine, window))
        return app_vm, window

    yield open_
    for app_vm, engine, window in opened:
        run(app_vm.aclose())
        window.close()
        shiboken6.delete(engine)  # before the view-models it shows
    qapp.setPalette(QPalette())
    run.pause(0.05)


# -- the real server, this device's engine, and the office -------------------------------------


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedServer]:
    """The real sync server on loopback (port 0), its SQLite database in the test's temp dir."""
    with start_server(f"sqlite:///{tmp_path / 'server.sqlite3'}", rate_limit_per_second=0) as s:
        yield s


def make_engine(store: Store, bus: EventBus, services: Services, url: str, token: str) -> Any:
    """This device's engine as the app runs it, tuned for tests: a refused connection makes it
    offline at once, it reconnects without jitter, and it sweeps rarely (a save wakes it)."""
    config = SyncConfig(
        server_url=url,
        reconnect_jitter_s=0,
        sweep_interval_s=30.0,
        transport=TransportConfig(connect_timeout=1.0, read_timeout=5.0),
        connectivity=ConnectivityConfig(failures_before_offline=1),
    )
    return SyncEngine(store, config, bus, token=lambda: token, executor=services.executor)


class EngineRun:
    """Engines running on the test's loop, stopped (and awaited) when the test ends."""

    def __init__(self, run: Runner) -> None:
        self.run = run
        self.running: list[tuple[Any, asyncio.Task[Any]]] = []

    def start(self, engine: Any) -> None:
        self.running.append((engine, self.run.loop.create_task(engine.run())))

    def stop_all(self) -> None:
        for engine, task in self.running:
            self.run(engine.stop(grace_s=2.0))
            if not task.done():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                self.run(_settle(task))
        self.running = []


async def _settle(task: asyncio.Task[Any]) -> None:
    with contextlib.suppress(asyncio.CancelledError):
        await task


@pytest.fixture
def engines(run: Runner) -> Iterator[EngineRun]:
    owner = EngineRun(run)
    yield owner
    owner.stop_all()


class Device:
    """This device (the window's store and bus) signed in to a server: its engine, and with
    `finder` its server search, put in the app's services as the program does at start.

    `sign_in` provisions the device on the real server; `connect` points it at any URL (a
    closed port is a server that is not there); `start` runs the engine on the test's loop."""

    def __init__(
        self, run: Runner, store: Store, bus: EventBus, services: Services, engines: EngineRun
    ) -> None:
        self.run = run
        self.store = store
        self.bus = bus
        self.services = services
        self.engines = engines
        self.token = ""
        self.clients: list[ServerClient] = []
        self.made: list[Any] = []  # every engine connect() built, run or not

    def sign_in(
        self,
        server: EmbeddedServer,
        name: str = "phone-1",
        *,
        user: str | None = None,
        team: str = "",
        finder: bool = False,
    ) -> str:
        """Provision `name` on `server` and connect to it; return the device's token."""
        self.connect(server.base_url, server.add_device(name, user=user, team=team), finder=finder)
        return self.token

    def connect(self, url: str, token: str | None = None, *, finder: bool = False) -> Any:
        """A new engine for `url` (with the same token unless given) in the services."""
        if token is not None:
            self.token = token
        engine = make_engine(self.store, self.bus, self.services, url, self.token)
        self.made.append(engine)
        self.services.engine = engine
        if finder:
            self.search_on(url)
        return engine

    def search_on(self, url: str) -> None:
        """The core's Finder (server search and pins) for `url` in the services."""
        token = self.token
        client = ServerClient(url, lambda: token)
        self.clients.append(client)
        self.services.finder = Finder(self.store, self.services.executor, client, self.bus)

    @property
    def engine(self) -> Any:
        return self.services.engine

    def start(self) -> None:
        self.engines.start(self.services.engine)

    def stop(self) -> None:
        """Stop the engine and take it out of the services, as before `connect`."""
        self.engines.stop_all()
        self.services.engine = None

    def close(self) -> None:
        # An engine closes its client when its run ends; one never run (a test used only its
        # uploader's thumbnails) would leave a connection open.
        for client in [*self.clients, *(engine.client for engine in self.made)]:
            self.run(client.aclose())
        self.clients, self.made = [], []


@pytest.fixture
def device(
    run: Runner, store: Store, bus: EventBus, services: Services, engines: EngineRun
) -> Iterator[Device]:
    connected = Device(run, store, bus, services, engines)
    yield connected
    engines.stop_all()
    connected.close()


class Office:
    """The dispatcher's device, an admin: writes work orders and attachments through its own
    store and syncs them to the server until idle."""

    def __init__(self, run: Runner, server: EmbeddedServer, data_dir: Path) -> None:
        self.run = run
        self.store = Store(data_dir)
        self.executor = StoreExecutor()
        self.token = server.add_device("office", "admin")
        self.url = server.base_url

    def sync(self, timeout: float = 20.0) -> None:
        config = SyncConfig(server_url=self.url, reconnect_jitter_s=0)
        engine = SyncEngine(self.store, config, token=lambda: self.token, executor=self.executor)
        assert self.run(engine.run_until_idle(timeout), timeout + 10)

    def create(self, **fields: Any) -> str:
        return self.store.record_edit("create", fields=fields).entity_id

    def update(self, entity_id: str, **fields: Any) -> None:
        self.store.record_edit("update", entity_id, fields)

    def close(self) -> None:
        self.executor.shutdown()
        self.store.close()


@pytest.fixture
def office(run: Runner, server: EmbeddedServer, tmp_path: Path) -> Iterator[Office]:
    opened = Office(run, server, tmp_path / "office")
    yield opened
    opened.close()
