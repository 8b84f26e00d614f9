"""The fault-injecting proxy itself: each fault does what it says, against the real server."""

from __future__ import annotations

import asyncio
import gc
import socket
import socketserver
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.chaos import plans as faults
from tests.chaos.helpers import add_device, new_id
from tests.chaos.plans import RandomPlan, ScriptedPlan
from tests.chaos.proxy import FaultProxy
from tests.support.serve import ServerProcess


@pytest.fixture
def token(server_process: ServerProcess) -> str:
    return add_device(server_process.db_url, "proxy-test")


@pytest.fixture
def direct(server_process: ServerProcess, token: str) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=server_process.base_url, headers=headers, timeout=10) as client:
        yield client


@pytest.fixture
def via(proxy: FaultProxy, token: str) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=proxy.base_url, headers=headers, timeout=5) as client:
        yield client


def _create(client: httpx.Client, entity_id: str) -> httpx.Response:
    body = {"entity_id": entity_id, "op": "create", "base_version": None,
            "fields": {"title": "Proxy test"}}  # fmt: skip
    return client.post("/v1/mutations", json=body, headers={"Idempotency-Key": new_id()})


def _exists(direct: httpx.Client, entity_id: str) -> bool:
    return direct.get(f"/v1/records/{entity_id}").status_code == 200


def test_pass_keeps_the_connection_alive(proxy: FaultProxy, via: httpx.Client) -> None:
    for _ in range(3):
        assert via.get("/healthz").json() == {"status": "ok"}
    assert [r.fault for r in proxy.snapshot()] == ["pass"] * 3


def test_refuse_and_reset_never_apply(
    proxy: FaultProxy, via: httpx.Client, direct: httpx.Client
) -> None:
    proxy.set_plan(ScriptedPlan([faults.refuse(), faults.reset()], paths="/v1/mutations"))
    for _ in range(2):
        entity_id = new_id()
        with pytest.raises(httpx.TransportError):
            _create(via, entity_id)
        assert not _exists(direct, entity_id)


def test_drop_response_applies_but_loses_the_acknowledgement(
    proxy: FaultProxy, via: httpx.Client, direct: httpx.Client
) -> None:
    proxy.set_plan(ScriptedPlan([faults.drop_response()], paths="/v1/mutations"))
    entity_id = new_id()
    with pytest.raises(httpx.TransportError):
        _create(via, entity_id)
    assert _exists(direct, entity_id)
    assert proxy.snapshot()[-1].upstream_status == 201


def test_canned_statuses_do_not_reach_the_server(
    proxy: FaultProxy, via: httpx.Client, direct: httpx.Client
) -> None:
    plan = [faults.status(502), faults.status(503, 1), faults.status(504),
            faults.status(429, retry_after=7)]  # fmt: skip
    proxy.set_plan(ScriptedPlan(plan, paths="/v1/mutations"))
    for fault in plan:
        entity_id = new_id()
        response = _create(via, entity_id)
        assert response.status_code == fault.status
        assert response.headers["content-type"] == "text/html"
        if fault.retry_after is not None:
            assert response.headers["retry-after"] == str(fault.retry_after)
        assert not _exists(direct, entity_id)


def test_truncate_garble_trickle_and_delay(proxy: FaultProxy, via: httpx.Client) -> None:
    proxy.set_plan(
        ScriptedPlan(
            [faults.truncate(), faults.garble(), faults.trickle(400.0), faults.delay(0.3)],
            paths="/v1/changes",
        )
    )
    with pytest.raises(httpx.RemoteProtocolError):
        via.get("/v1/changes")
    garbled = via.get("/v1/changes")
    assert garbled.status_code == 200
    assert garbled.headers["content-type"] == "text/html"
    started = time.monotonic()
    assert via.get("/v1/changes").json()["changes"] == []
    trickled = time.monotonic() - started
    started = time.monotonic()
    assert via.get("/v1/changes").status_code == 200
    assert time.monotonic() - started >= 0.3
    assert trickled >= 0.2  # a few hundred bytes at 400 B/s


def test_link_down_refuses_connections_then_recovers(proxy: FaultProxy, via: httpx.Client) -> None:
    proxy.link_down()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{proxy.base_url}/healthz", timeout=2)
    proxy.link_up()
    assert via.get("/healthz").status_code == 200
    # Long enough offline that a loaded machine still asks while the link is down; the test
    # waits for the flap itself instead of guessing when it happened.
    proxy.flap([(0.2, 3.0)])
    deadline = time.monotonic() + 5
    while proxy.online and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not proxy.online
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{proxy.base_url}/healthz", timeout=2)
    proxy.wait_flapping(10)
    assert httpx.get(f"{proxy.base_url}/healthz", timeout=2).status_code == 200


def test_random_plan_is_reproducible() -> None:
    info = faults.RequestInfo(0, "POST", "/v1/mutations", 10)
    first = RandomPlan(seed=42, rate=0.6)
    second = RandomPlan(seed=42, rate=0.6)
    drawn = [first(info) for _ in range(200)]
    assert drawn == [second(info) for _ in range(200)]
    kinds = {fault.kind for fault in drawn}
    assert {"pass", "drop_response", "status", "refuse"} <= kinds


class CountingUpstream(socketserver.ThreadingTCPServer):
    """A bare HTTP/1.1 upstream that records, per connection, the body bytes that arrived
    before the request was complete or the connection ended, and answers complete ones."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.bodies: list[tuple[int, bool]] = []  # (bytes received, whole body received)
        super().__init__(("127.0.0.1", 0), _CountingHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server_address[:2]
        return str(host), int(port)


class _CountingHandler(socketserver.StreamRequestHandler):
    server: CountingUpstream

    def handle(self) -> None:
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            line = self.rfile.readline()
            if not line:
                return
            head += line
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        received = 0
        while received < length:
            block = self.rfile.read1(min(65536, length - received))
            if not block:
                break
            received += len(block)
        self.server.bodies.append((received, received == length))
        if received == length:
            self.wfile.write(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")


@pytest.fixture
def counting() -> Iterator[tuple[CountingUpstream, FaultProxy]]:
    upstream = CountingUpstream()
    running = FaultProxy(upstream.address).start()
    try:
        yield upstream, running
    finally:
        running.stop()
        upstream.shutdown()
        upstream.server_close()


def _wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_cut_body_delivers_exactly_the_bytes_before_the_cut(
    counting: tuple[CountingUpstream, FaultProxy],
) -> None:
    upstream, proxy = counting
    seen: list[faults.RequestInfo] = []

    def plan(info: faults.RequestInfo) -> faults.Fault:
        seen.append(info)
        return faults.cut_body(300_000) if info.method == "PATCH" else faults.PASS

    proxy.set_plan(plan)
    body = bytes(range(256)) * 4096  # 1 MiB
    headers = {"Upload-Offset": "4096", "Content-Type": "application/offset+octet-stream"}
    with httpx.Client(base_url=proxy.base_url, timeout=10) as client:
        with pytest.raises(httpx.TransportError):
            client.patch("/v1/uploads/abc", content=body, headers=headers)
        _wait_for(lambda: len(upstream.bodies) == 1)
        assert upstream.bodies == [(300_000, False)]
        # A body no longer than the cut passes whole, and its answer comes back.
        assert client.put("/sink", content=body).status_code == 204
        assert client.patch("/v1/uploads/abc", content=body[:1000]).status_code == 204
    _wait_for(lambda: len(upstream.bodies) == 3)
    assert upstream.bodies[1:] == [(len(body), True), (1000, True)]
    assert seen[0].body_bytes == len(body)
    assert seen[0].header("upload-offset") == "4096"
    assert seen[0].header("Content-Type") == "application/offset+octet-stream"
    assert seen[0].header("upload-length") is None
    records = proxy.snapshot()
    assert records[0].header("upload-offset") == "4096"
    assert [(r.method, r.fault, r.body_bytes) for r in records] == [
        ("PATCH", "cut_body", 300_000),
        ("PUT", "pass", len(body)),
        ("PATCH", "pass", 1000),
    ]


def test_cut_body_at_zero_sends_the_head_alone(
    counting: tuple[CountingUpstream, FaultProxy],
) -> None:
    upstream, proxy = counting
    proxy.set_plan(ScriptedPlan([faults.cut_body(0)], paths="/v1/uploads"))
    with (
        httpx.Client(base_url=proxy.base_url, timeout=10) as client,
        pytest.raises(httpx.TransportError),
    ):
        client.patch("/v1/uploads/abc", content=b"x" * 5000)
    _wait_for(lambda: len(upstream.bodies) == 1)
    assert upstream.bodies == [(0, False)]
    assert proxy.snapshot()[0].body_bytes == 0
    with pytest.raises(ValueError, match="after_bytes"):
        faults.cut_body(-1)


def test_a_client_gone_mid_body_is_recorded_with_what_it_sent(
    counting: tuple[CountingUpstream, FaultProxy],
) -> None:
    upstream, proxy = counting
    with socket.create_connection(("127.0.0.1", proxy.port)) as client:
        client.sendall(
            b"PATCH /v1/uploads/abc HTTP/1.1\r\nhost: x\r\nupload-offset: 8192\r\n"
            b"content-length: 10000\r\n\r\n" + b"y" * 3000
        )
    _wait_for(lambda: len(proxy.snapshot()) == 1)
    record = proxy.snapshot()[0]
    assert (record.method, record.fault, record.body_bytes) == ("PATCH", "client_gone", 3000)
    assert record.header("Upload-Offset") == "8192"
    assert record.upstream_status is None
    assert upstream.bodies == []  # nothing of an unfinished body is forwarded


def test_a_proxy_left_running_does_not_hold_the_interpreter_at_exit() -> None:
    """A test or benchmark that fails before `stop()` must not hang its run at exit."""
    code = "from tests.chaos.proxy import FaultProxy; FaultProxy(('127.0.0.1', 9)).start()"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_a_connection_accepted_as_the_link_goes_down_is_closed_not_leaked() -> None:
    """CPython 3.11 drops, unclosed and unreported, a connection its loop has accepted but not
    yet attached when the listener closes; the garbage collector warned about it later, in
    whichever test ran then. The race, made exact on the proxy's own loop: the client connects
    (the kernel completes it), the loop accepts it on the next turn, and the link goes down
    before the turn after, where the connection would attach."""
    proxy = FaultProxy(("127.0.0.1", 9)).start()

    async def connect_as_the_link_goes_down() -> None:
        client = socket.create_connection(("127.0.0.1", proxy.port))
        try:
            await asyncio.sleep(0)  # the listener's accept runs after this turn...
            await asyncio.sleep(0)  # ...and this one ends before the connection attaches
            await proxy._down()
        finally:
            client.close()

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            proxy._call(connect_as_the_link_goes_down())
            gc.collect()
    finally:
        proxy.stop()
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == []
