"""Helpers for the sync tests: fast configs, engines, a fault-injecting transport, waits."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from app.store.backoff import BackoffPolicy
from app.store.db import connection
from app.store.queue import QueueConfig
from app.store.store import Store
from app.sync.connectivity import ConnectivityConfig
from app.sync.engine import SyncConfig, SyncEngine
from app.sync.transport import TransportConfig
from tests.sync.fake_clock import FakeClock

__all__ = [
    "Fault",
    "FaultTransport",
    "closed_port_url",
    "counters",
    "fast_config",
    "job_rows",
    "make_engine",
    "make_store",
    "run_engine_until",
    "running",
    "sync_until_idle",
    "wait_until",
]

FAST_BACKOFF = BackoffPolicy(initial=0.05, base=2.0, cap=0.5, jitter=0.5)


def make_store(
    path: Path,
    *,
    max_attempts: int = 12,
    backoff: BackoffPolicy = FAST_BACKOFF,
    clock: FakeClock | None = None,
) -> Store:
    """A device store; with ``clock``, its queue times follow that fake clock's wall time."""
    return Store(
        path,
        synchronous="NORMAL",
        queue_config=QueueConfig(max_attempts=max_attempts, backoff=backoff),
        rng=random.Random(7),
        **({} if clock is None else {"clock": clock.time}),
    )


def fast_config(base_url: str, **overrides: Any) -> SyncConfig:
    values: dict[str, Any] = {
        "server_url": base_url,
        "batch_size": 50,
        "request_rate": 1000.0,
        "request_burst": 1000.0,
        "reconnect_jitter_s": 0.0,
        "pull_page_size": 100,
        "transport": TransportConfig(connect_timeout=2.0, read_timeout=5.0, write_timeout=5.0),
        "connectivity": ConnectivityConfig(
            failures_before_offline=3,
            probe_backoff=BackoffPolicy(initial=0.05, base=2.0, cap=0.5, jitter=0.5),
        ),
    }
    values.update(overrides)
    return SyncConfig(**values)


def make_engine(
    store: Store,
    base_url: str,
    token: str,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    clock: FakeClock | None = None,
    **overrides: Any,
) -> SyncEngine:
    """An engine with fast settings; with ``clock``, its waits are that fake clock's."""
    return SyncEngine(
        store,
        fast_config(base_url, **overrides),
        token=lambda: token,
        transport=transport,
        rng=random.Random(11),
        clock=clock,
        sleep=None if clock is None else clock.sleep,
    )


def close_engine_thread(engine: SyncEngine) -> None:
    # The store thread has its own SQLite connection; close it with the executor.
    engine.executor.submit(engine.store.db.close)
    engine.executor.shutdown()


async def sync_until_idle(
    store: Store,
    base_url: str,
    token: str,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    limit_s: float = 15.0,
    expect_idle: bool = True,
    **overrides: Any,
) -> SyncEngine:
    """One `fieldsync sync --until-idle` round in-process; returns the (finished) engine."""
    engine = make_engine(store, base_url, token, transport=transport, **overrides)
    try:
        idle = await engine.run_until_idle(limit_s)
    finally:
        close_engine_thread(engine)
    assert idle is expect_idle, f"run_until_idle returned {idle}; last error {engine.last_error}"
    return engine


@contextlib.asynccontextmanager
async def running(engine: SyncEngine, *, grace_s: float = 2.0) -> AsyncIterator[asyncio.Task[None]]:
    """The engine runs inside the block; it is stopped (and its store thread closed) after."""
    runner = asyncio.create_task(engine.run())
    try:
        yield runner
    finally:
        await engine.stop(grace_s)
        if not runner.done():
            runner.cancel()
        try:
            await runner
        except asyncio.CancelledError:
            pass
        finally:
            close_engine_thread(engine)


async def wait_until(
    engine: SyncEngine,
    runner: asyncio.Task[None],
    predicate: Callable[[], bool],
    *,
    within_s: float = 10.0,
) -> None:
    """Wait until ``predicate()`` holds, checked after every event the engine publishes (it
    publishes every job outcome, connectivity change and sync), so nothing polls; with a
    `FakeClock`, time jumps to the engine's next timer whenever it sleeps. ``within_s``
    bounds the real time."""
    changed = asyncio.Event()
    unsubscribe = engine.events.subscribe(lambda _event: changed.set())
    clock = engine.clock if isinstance(engine.clock, FakeClock) else None
    try:
        async with asyncio.timeout(within_s):
            while not predicate():
                if runner.done():
                    runner.result()
                    raise AssertionError("the engine stopped on its own")
                changed.clear()
                waits = [asyncio.ensure_future(changed.wait())]
                if clock is not None:
                    waits.append(asyncio.ensure_future(clock.asleep()))
                await asyncio.wait({runner, *waits}, return_when=asyncio.FIRST_COMPLETED)
                for wait in waits:
                    wait.cancel()
                await asyncio.gather(*waits, return_exceptions=True)
                if clock is not None and not changed.is_set() and clock.sleeping():
                    await clock.advance(clock.sleeping()[0] - clock.now)
    except TimeoutError:
        raise AssertionError(f"condition not reached in {within_s} s") from None
    finally:
        unsubscribe()


async def run_engine_until(
    engine: SyncEngine,
    predicate: Callable[[], bool],
    *,
    within_s: float = 10.0,
    grace_s: float = 2.0,
) -> None:
    """Run the engine until ``predicate()`` holds (see `wait_until`), then stop it."""
    async with running(engine, grace_s=grace_s) as runner:
        await wait_until(engine, runner, predicate, within_s=within_s)


def job_rows(store: Store) -> list[dict[str, Any]]:
    cursor = connection(store.db).execute("SELECT * FROM jobs ORDER BY id")
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def counters(store: Store) -> dict[str, int]:
    """The store's named counters (duplicates detected, conflicts merged, ...)."""
    return dict(connection(store.db).execute("SELECT name, value FROM counters").fetchall())


def closed_port_url() -> str:
    """A loopback URL nobody listens on (bound, then closed: connections are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# -- fault injection ---------------------------------------------------------------------------


@dataclass
class Fault:
    """One planned misbehaviour for the next matching request.

    kind: ``drop`` (fail before sending: the server never sees it), ``lose`` (forward, let the
    server apply it, then raise ReadError instead of answering), ``timeout`` (like lose, as a
    read timeout), ``delay`` (answer after ``seconds``), ``status`` (answer ``status`` without
    forwarding, with ``headers``), ``truncate`` (forward, answer half of the body).
    """

    kind: str
    status: int = 503
    seconds: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    path_prefix: str = "/v1/mutations"


class FaultTransport(httpx.AsyncBaseTransport):
    """Wraps a real transport to the server; plays planned faults, logs every request."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.inner = inner or httpx.AsyncHTTPTransport()
        self.faults: list[Fault] = []
        self.requests: list[httpx.Request] = []
        self.forwarded: list[httpx.Request] = []
        self.on_request: Callable[[httpx.Request], Awaitable[None]] | None = None

    def plan(self, *faults: Fault) -> None:
        self.faults.extend(faults)

    def paths(self) -> list[str]:
        return [r.url.path for r in self.requests]

    def _take(self, request: httpx.Request) -> Fault | None:
        for index, fault in enumerate(self.faults):
            if request.url.path.startswith(fault.path_prefix):
                return self.faults.pop(index)
        return None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.on_request is not None:
            await self.on_request(request)
        fault = self._take(request)
        if fault is not None and fault.kind == "drop":
            raise httpx.ConnectError("fault: dropped before send", request=request)
        if fault is not None and fault.kind == "status":
            body = json.dumps({"error": "fault"}).encode()
            headers = {"content-type": "application/json", **fault.headers}
            return httpx.Response(fault.status, headers=headers, content=body, request=request)
        self.forwarded.append(request)
        response = await self.inner.handle_async_request(request)
        content = await response.aread()
        await response.aclose()
        if fault is None:
            return httpx.Response(
                response.status_code, headers=_plain(response.headers), content=content,
                request=request,
            )  # fmt: skip
        if fault.kind == "lose":
            raise httpx.ReadError(
                "fault: response lost after the server applied it", request=request
            )
        if fault.kind == "timeout":
            raise httpx.ReadTimeout(
                "fault: read timed out after the server applied it", request=request
            )
        if fault.kind == "delay":
            await asyncio.sleep(fault.seconds)
        if fault.kind == "truncate":
            content = content[: len(content) // 2]
        return httpx.Response(
            response.status_code, headers=_plain(response.headers), content=content, request=request
        )

    async def aclose(self) -> None:
        # Each engine closes its client at the end of its run; a later engine reuses this
        # wrapper (and its request log) with a fresh connection pool.
        await self.inner.aclose()
        self.inner = httpx.AsyncHTTPTransport()


def _plain(headers: httpx.Headers) -> dict[str, str]:
    return {
        k: v
        for k, v in headers.items()
        if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")
    }
