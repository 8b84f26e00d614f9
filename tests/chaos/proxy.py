"""A fault-injecting HTTP/1.1 proxy on loopback, scriptable per request.

    proxy = FaultProxy(("127.0.0.1", 8750), RandomPlan(seed=7, rate=0.5)).start()
    ...  # point clients at proxy.base_url
    proxy.link_down(); proxy.link_up()      # the whole link, at once
    proxy.flap([(2.0, 1.0)] * 5)            # online 2 s, offline 1 s, five times
    proxy.stop()

Once a request's head has arrived, a *plan* (any callable taking a `RequestInfo`: method,
path, headers, body length) picks a `Fault`: forward it untouched, refuse it (reset before
anything reaches the server), reset mid-request (half the request reaches the server), cut the
body after N bytes (an upload whose link dies: those N bytes reach the server, then its
connection ends, and the client's is reset), forward it then drop the response (the lost
acknowledgement), delay it, answer 502/503/504 or 429 + Retry-After itself, truncate or garble
the response body, or trickle the response out slowly. While the link is down the listening
socket is closed (new connections are refused) and open connections are reset.

The proxy runs on the loopback harness (`benchmarks/loopback_proxy.py`) so that it serves
subprocesses and in-process clients alike; every request is logged (`records`) for rate figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchmarks.loopback_proxy import LoopbackProxy, reset_connection

__all__ = [
    "PASS",
    "Fault",
    "FaultProxy",
    "ForcedFaults",
    "RandomPlan",
    "RequestInfo",
    "RequestRecord",
    "ScriptedPlan",
    "cut_body",
    "delay",
    "drop_response",
    "garble",
    "refuse",
    "reset",
    "status",
    "trickle",
    "truncate",
]

_HOP_BY_HOP = {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"te"}
_MAX_HEAD = 64 * 1024


@dataclass(frozen=True)
class Fault:
    """What the proxy does to one request. Build with the helpers below."""

    kind: str  # pass refuse reset cut_body drop_response delay status truncate garble trickle
    seconds: float = 0.0
    status: int = 0
    retry_after: int | None = None
    bytes_per_s: float = 0.0
    after_bytes: int = 0

    @property
    def reaches_server(self) -> bool:
        """Whether the server sees the whole request (it may apply it)."""
        return self.kind in ("pass", "drop_response", "delay", "truncate", "garble", "trickle")


PASS = Fault("pass")


def refuse() -> Fault:
    return Fault("refuse")


def reset() -> Fault:
    return Fault("reset")


def cut_body(after_bytes: int) -> Fault:
    """Forward the head and the first `after_bytes` of the body, then end the connection to
    the server (a clean close, so it gets exactly those bytes) and reset the client's. A body
    no longer than `after_bytes` passes untouched (its response comes back)."""
    if after_bytes < 0:
        raise ValueError(f"after_bytes must be >= 0, not {after_bytes}")
    return Fault("cut_body", after_bytes=after_bytes)


def drop_response() -> Fault:
    return Fault("drop_response")


def delay(seconds: float) -> Fault:
    return Fault("delay", seconds=seconds)


def status(code: int, retry_after: int | None = None) -> Fault:
    return Fault("status", status=code, retry_after=retry_after)


def truncate() -> Fault:
    return Fault("truncate")


def garble() -> Fault:
    return Fault("garble")


def trickle(bytes_per_s: float) -> Fault:
    return Fault("trickle", bytes_per_s=bytes_per_s)


@dataclass(frozen=True)
class RequestInfo:
    index: int
    method: str
    path: str
    body_bytes: int  # the declared Content-Length (or the chunked body's size)
    headers: tuple[tuple[str, str], ...] = ()  # lower-case names, in order

    def header(self, name: str) -> str | None:
        """The first value of header `name` (any case), None when absent."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key == wanted), None)


@dataclass(frozen=True)
class RequestRecord:
    at: float  # time.monotonic() when the request head arrived
    method: str
    path: str
    fault: str
    upstream_status: int | None
    #: Request-body bytes the proxy read from the client: what the client sent (a cut body
    #: counts what arrived before the cut), so resent bytes are a sum over these.
    body_bytes: int = 0
    headers: tuple[tuple[str, str], ...] = ()  # the request's, lower-case names

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((value for key, value in self.headers if key == wanted), None)


Plan = Callable[[RequestInfo], Fault]


class ScriptedPlan:
    """Faults in order (one per request), then `then` for every later request."""

    def __init__(self, faults: Sequence[Fault], then: Fault = PASS, *, paths: str = "") -> None:
        self._faults = list(faults)
        self._then = then
        self._paths = paths

    def __call__(self, info: RequestInfo) -> Fault:
        if not info.path.startswith(self._paths):
            return PASS
        return self._faults.pop(0) if self._faults else self._then


#: Relative weights of the random plan's faults (the rest of the time: pass).
DEFAULT_MIX: dict[str, float] = {
    "refuse": 1.0,
    "reset": 1.0,
    "drop_response": 2.0,
    "delay": 1.0,
    "status": 2.0,
    "truncate": 1.0,
    "garble": 1.0,
    "trickle": 0.5,
}


class RandomPlan:
    """Seeded random faults: each request is faulty with probability `rate`.

    The n-th request always draws the same fault for a given seed; which request is the n-th
    depends on timing, so a replay reproduces the fault sequence, not every interleaving.
    """

    def __init__(
        self,
        seed: int,
        rate: float,
        mix: dict[str, float] | None = None,
        *,
        max_delay_s: float = 1.5,
    ) -> None:
        self.seed = seed
        self.rate = rate
        self.mix = dict(mix or DEFAULT_MIX)
        self.max_delay_s = max_delay_s
        self._rng = random.Random(seed)
        self.counts: dict[str, int] = {}

    def __call__(self, info: RequestInfo) -> Fault:
        rng = self._rng
        fault = PASS
        if rng.random() < self.rate:
            kinds = list(self.mix)
            kind = rng.choices(kinds, weights=[self.mix[k] for k in kinds])[0]
            if kind == "delay":
                fault = delay(rng.uniform(0.05, self.max_delay_s))
            elif kind == "status":
                code = rng.choice((502, 503, 504, 429))
                fault = status(code, retry_after=1 if code in (429, 503) else None)
            elif kind == "trickle":
                fault = trickle(rng.uniform(300.0, 3000.0))
            else:
                fault = Fault(kind)
        self.counts[fault.kind] = self.counts.get(fault.kind, 0) + 1
        return fault


class ForcedFaults:
    """`plan`, except that the n-th request under `prefix` (n counted from 0, for each n in
    `at`) gets `fault`. A seeded plan may happen to draw no lost response on the path that
    matters; these make sure the run has some, whatever the seed."""

    def __init__(self, plan: Plan, prefix: str, at: Sequence[int], fault: Fault) -> None:
        self.plan = plan
        self.prefix = prefix
        self.at = frozenset(at)
        self.fault = fault
        self._seen = 0
        self._lock = threading.Lock()

    def __call__(self, info: RequestInfo) -> Fault:
        if info.path.startswith(self.prefix):
            with self._lock:
                index = self._seen
                self._seen += 1
            if index in self.at:
                return self.fault
        return self.plan(info)


class FaultProxy(LoopbackProxy):
    """See the module docstring. `start()` returns self once the proxy accepts connections."""

    thread_name = "fault-proxy"

    def __init__(self, upstream: tuple[str, int], plan: Plan | None = None) -> None:
        super().__init__(upstream)
        self.plan: Plan = plan or (lambda info: PASS)
        self.records: list[RequestRecord] = []
        self.online = True
        self._lock = threading.Lock()
        self._index = 0
        self._upstreams: set[asyncio.StreamWriter] = set()
        self._flapper: asyncio.Task[None] | None = None

    # -- control (any thread) --------------------------------------------------------------

    def set_plan(self, plan: Plan) -> None:
        self.plan = plan

    def set_upstream(self, upstream: tuple[str, int]) -> None:
        """Forward to another server from the next request on (a restarted one)."""
        self.upstream = upstream

    def link_down(self) -> None:
        self._call(self._down())

    def link_up(self) -> None:
        self._call(self._up())

    def flap(self, schedule: Sequence[tuple[float, float]]) -> None:
        """Online for a, offline for b, for each (a, b); returns at once, ends online."""
        self._call(self._start_flapping(list(schedule)))

    def wait_flapping(self, timeout: float) -> None:
        async def wait() -> None:
            if self._flapper is not None:
                await asyncio.wait_for(asyncio.shield(self._flapper), timeout)

        self._call(wait(), timeout + 5)

    def snapshot(self) -> list[RequestRecord]:
        with self._lock:
            return list(self.records)

    def clear_records(self) -> None:
        with self._lock:
            self.records.clear()

    # -- the loop's side ---------------------------------------------------------------------

    async def _listen(self) -> None:
        await super()._listen()
        self.online = True

    async def _down(self) -> None:
        # Closed before `online` turns false, so whoever sees it false finds the port closed.
        if self._server is not None:
            self._server.close()
            self._server = None
        self.online = False
        for writer in list(self._open):
            reset_connection(writer)

    async def _up(self) -> None:
        if self._server is None:
            await self._listen()

    async def _start_flapping(self, schedule: list[tuple[float, float]]) -> None:
        async def run() -> None:
            for up_s, down_s in schedule:
                await asyncio.sleep(up_s)
                await self._down()
                await asyncio.sleep(down_s)
                await self._up()

        self._flapper = asyncio.get_running_loop().create_task(run())

    async def _shutdown(self) -> None:
        """Close everything before the loop stops: a request still waiting on its upstream
        would otherwise keep a socket that the garbage collector later reports as unclosed."""
        if self._flapper is not None:
            self._flapper.cancel()
        await self._down()
        current = asyncio.current_task()
        # Until nothing is left: a connection accepted just before the listener closed makes
        # its writer and its task only on a later turn, after a first sweep has passed.
        for _ in range(20):
            pending = [task for task in asyncio.all_tasks() if task is not current]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            for writer in list(self._open | self._upstreams):
                writer.transport.abort()
            for _ in range(3):
                await asyncio.sleep(0)  # closed transports drop their sockets on these turns
            if not self._open and all(task is current for task in asyncio.all_tasks()):
                break
            await asyncio.sleep(0.01)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while self.online:
                head = await _read_head(reader)
                if head is None:
                    break
                method, path = _request_line(head)
                pairs = _header_pairs(head)
                try:
                    fault, body, length = await self._plan_and_read(head, pairs, reader)
                except _ClientGone as gone:
                    # The client died or hung up mid-body (a killed device): what it had
                    # sent is still recorded, as `client_gone`.
                    note = self._recorder(
                        time.monotonic(), method, path, "client_gone", gone.arrived, pairs
                    )
                    note(None)
                    break
                note = self._recorder(time.monotonic(), method, path, fault.kind, len(body), pairs)
                try:
                    keep = await self._apply(fault, head, body, length, writer, note)
                finally:
                    note(None)
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError, OSError):
            pass
        finally:
            self._open.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _plan_and_read(
        self, head: bytes, pairs: tuple[tuple[str, str], ...], reader: asyncio.StreamReader
    ) -> tuple[Fault, bytes, int]:
        """The plan's fault for this request, the body read from the client and the whole
        body's length. A body of known length is planned before it is read, so that a cut
        reads (and forwards) only the bytes before it, as a dying link delivers them."""
        headers = _headers(head)
        chunked = headers.get(b"transfer-encoding", b"").lower() == b"chunked"
        body = await _read_body(reader, headers) if chunked else b""
        length = len(body) if chunked else int(headers.get(b"content-length", b"0") or 0)
        with self._lock:
            index = self._index
            self._index += 1
        method, path = _request_line(head)
        fault = self.plan(RequestInfo(index, method, path, length, pairs))
        cut = fault.kind == "cut_body" and fault.after_bytes < length
        if not chunked:
            body = await _read_exactly(reader, fault.after_bytes if cut else length)
        if not cut and fault.kind == "cut_body":
            fault = PASS  # nothing to cut: the whole body is shorter
        return fault, body, length

    def _recorder(
        self,
        at: float,
        method: str,
        path: str,
        kind: str,
        body_bytes: int,
        headers: tuple[tuple[str, str], ...],
    ) -> Callable[[int | None], None]:
        """Records a request once, before the client sees its outcome, so a test reading
        `records` right after its request returned always finds it."""
        noted = False

        def note(upstream_status: int | None) -> None:
            nonlocal noted
            if not noted:
                noted = True
                with self._lock:
                    self.records.append(
                        RequestRecord(at, method, path, kind, upstream_status, body_bytes, headers)
                    )

        return note

    async def _apply(
        self,
        fault: Fault,
        head: bytes,
        body: bytes,
        length: int,
        writer: asyncio.StreamWriter,
        note: Callable[[int | None], None],
    ) -> bool:
        kind = fault.kind
        if kind == "refuse":
            note(None)
            reset_connection(writer)
            return False
        if kind == "status":
            note(None)
            writer.write(_canned(fault.status, fault.retry_after))
            await writer.drain()
            return True
        if kind == "reset":
            await self._forward(head, body, partial=True)
            note(None)
            reset_connection(writer)
            return False
        if kind == "cut_body":
            note(await self._forward_cut(head, body[: fault.after_bytes], length))
            reset_connection(writer)
            return False
        if kind == "delay":
            await asyncio.sleep(fault.seconds)
        response = await self._forward(head, body)
        assert response is not None
        code, response_head, response_body = response
        note(code)
        if kind == "drop_response":
            reset_connection(writer)
            return False
        if kind == "garble":
            response_head = _replace_header(response_head, b"content-type", b"text/html")
            response_body = b"<html><body>502 Bad Gateway</body></html>"
        data = _framed(response_head, response_body)
        if kind == "truncate":
            writer.write(data[: len(data) - max(len(response_body) // 2, 1)])
            await writer.drain()
            return False
        if kind == "trickle":
            step = 32
            for start in range(0, len(data), step):
                writer.write(data[start : start + step])
                await writer.drain()
                await asyncio.sleep(step / fault.bytes_per_s)
            return True
        writer.write(data)
        await writer.drain()
        return True

    async def _forward(
        self, head: bytes, body: bytes, *, partial: bool = False
    ) -> tuple[int, bytes, bytes] | None:
        reader, writer = await asyncio.open_connection(*self.upstream)
        self._upstreams.add(writer)
        try:
            out_head = _replace_header(_strip_hop_by_hop(head), b"connection", b"close")
            out_head = _replace_header(out_head, b"content-length", str(len(body)).encode())
            data = out_head + b"\r\n" + body
            if partial:
                writer.write(data[: max(len(out_head) + len(body) // 2, len(out_head) // 2)])
                await writer.drain()
                reset_connection(writer)
                return None
            writer.write(data)
            await writer.drain()
            response = await _read_response(reader)
        finally:
            self._upstreams.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        return response

    async def _forward_cut(self, head: bytes, prefix: bytes, length: int) -> int | None:
        """Send the head (announcing the whole body, `length` bytes) and `prefix`, then end
        the stream: the server reads exactly `prefix`, then the end of its connection. Waits
        (10 s at most) for it to answer or close, so that it has seen the cut before the
        client can retry; returns the status it answered, if any."""
        reader, writer = await asyncio.open_connection(*self.upstream)
        self._upstreams.add(writer)
        try:
            out_head = _replace_header(_strip_hop_by_hop(head), b"connection", b"close")
            out_head = _replace_header(out_head, b"content-length", str(length).encode())
            writer.write(out_head + b"\r\n" + prefix)
            await writer.drain()
            writer.write_eof()
            try:
                answer = await asyncio.wait_for(reader.read(), 10.0)
            except (TimeoutError, ConnectionError):
                return None
            status_line = answer.split(b"\r\n", 1)[0].split(b" ")
            if len(status_line) > 1 and status_line[0].startswith(b"HTTP/"):
                return int(status_line[1]) if status_line[1].isdigit() else None
            return None
        finally:
            self._upstreams.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


# -- HTTP/1.1 framing (just what the clients and uvicorn here speak) --------------------------


async def _read_head(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    if len(head) > _MAX_HEAD:
        raise ValueError("head too large")
    return head[:-2]  # keep the last header's CRLF, drop the blank line


class _ClientGone(Exception):
    """The client's connection ended (FIN or reset) before its body was whole."""

    def __init__(self, arrived: int) -> None:
        super().__init__(f"client gone after {arrived} body bytes")
        self.arrived = arrived


async def _read_exactly(reader: asyncio.StreamReader, length: int) -> bytes:
    """`length` body bytes; `_ClientGone` (saying how many came) if the connection ends."""
    body = bytearray()
    try:
        while len(body) < length:
            block = await reader.read(min(length - len(body), 1 << 20))
            if not block:
                raise _ClientGone(len(body))
            body += block
    except (ConnectionError, OSError):
        raise _ClientGone(len(body)) from None
    return bytes(body)


def _headers(head: bytes) -> dict[bytes, bytes]:
    found: dict[bytes, bytes] = {}
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            found[name.strip().lower()] = value.strip()
    return found


async def _read_body(reader: asyncio.StreamReader, headers: dict[bytes, bytes]) -> bytes:
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        chunks = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                # Trailers end with a blank line; we sent none and read the final CRLF above.
                return b"".join(chunks)
            chunks.append(chunk[:-2])
    length = int(headers.get(b"content-length", b"0") or 0)
    return await reader.readexactly(length)


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bytes]:
    head = await _read_head(reader)
    if head is None:
        raise ConnectionError("upstream closed without a response")
    code = int(head.split(b" ", 2)[1])
    headers = _headers(head)
    if code in (204, 304) or b"content-length" in headers or b"transfer-encoding" in headers:
        body = b"" if code in (204, 304) else await _read_body(reader, headers)
    else:
        body = await reader.read()
    return code, _strip_hop_by_hop(head), body


def _header_pairs(head: bytes) -> tuple[tuple[str, str], ...]:
    return tuple(
        (name.decode("latin-1"), value.decode("latin-1")) for name, value in _headers(head).items()
    )


def _request_line(head: bytes) -> tuple[str, str]:
    method, target, _ = head.split(b"\r\n", 1)[0].split(b" ", 2)
    return method.decode("ascii"), target.decode("latin-1").split("?", 1)[0]


def _strip_hop_by_hop(head: bytes) -> bytes:
    lines = head.split(b"\r\n")
    kept = [lines[0]]
    for line in lines[1:]:
        name = line.partition(b":")[0].strip().lower()
        if line and name not in _HOP_BY_HOP and name != b"content-length":
            kept.append(line)
    return b"\r\n".join(kept) + b"\r\n"


def _replace_header(head: bytes, name: bytes, value: bytes) -> bytes:
    lines = [
        line
        for line in head.rstrip(b"\r\n").split(b"\r\n")
        if line.partition(b":")[0].strip().lower() != name
    ]
    lines.append(name + b": " + value)
    return b"\r\n".join(lines) + b"\r\n"


def _framed(head: bytes, body: bytes) -> bytes:
    head = _replace_header(head, b"content-length", str(len(body)).encode())
    return head + b"\r\n" + body


_REASONS = {429: b"Too Many Requests", 502: b"Bad Gateway", 503: b"Service Unavailable",
            504: b"Gateway Timeout"}  # fmt: skip


def _canned(code: int, retry_after: int | None) -> bytes:
    """An answer from a middlebox, not the server: plain HTML, like a reverse proxy's."""
    body = b"<html><body><h1>%d</h1></body></html>" % code
    head = b"HTTP/1.1 %d %s\r\ncontent-type: text/html\r\n" % (code, _REASONS.get(code, b"Err"))
    if retry_after is not None:
        head += b"retry-after: %d\r\n" % retry_after
    return _framed(head, body)
