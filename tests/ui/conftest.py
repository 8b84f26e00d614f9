"""Fixtures for the Qt app tests: offscreen Qt, a qasync loop, a real store in a temp dir."""

from __future__ import annotations

import asyncio
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
