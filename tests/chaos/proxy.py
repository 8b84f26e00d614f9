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
The faults and plans live in `tests/chaos/plans.py` (import them from there), the HTTP/1.1
framing in `tests/chaos/http_framing.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Sequence

from benchmarks.loopback_proxy import LoopbackProxy, reset_connection
from tests.chaos import http_framing as http
from tests.chaos.plans import PASS, Fault, Plan, RequestInfo, RequestRecord

__all__ = ["FaultProxy"]


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
        await self._close_listener()
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
                head = await http.read_head(reader)
                if head is None:
                    break
                method, path = http.request_line(head)
                pairs = http.header_pairs(head)
                try:
                    fault, body, length = await self._plan_and_read(head, pairs, reader)
                except http.ClientGone as gone:
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
        headers = http.header_map(head)
        chunked = headers.get(b"transfer-encoding", b"").lower() == b"chunked"
        body = await http.read_body(reader, headers) if chunked else b""
        length = len(body) if chunked else int(headers.get(b"content-length", b"0") or 0)
        with self._lock:
            index = self._index
            self._index += 1
        method, path = http.request_line(head)
        fault = self.plan(RequestInfo(index, method, path, length, pairs))
        cut = fault.kind == "cut_body" and fault.after_bytes < length
        if not chunked:
            body = await http.read_exactly(reader, fault.after_bytes if cut else length)
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
            writer.write(http.canned(fault.status, fault.retry_after))
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
            response_head = http.replace_header(response_head, b"content-type", b"text/html")
            response_body = b"<html><body>502 Bad Gateway</body></html>"
        data = http.framed(response_head, response_body)
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
            out_head = http.replace_header(http.strip_hop_by_hop(head), b"connection", b"close")
            out_head = http.replace_header(out_head, b"content-length", str(len(body)).encode())
            data = out_head + b"\r\n" + body
            if partial:
                writer.write(data[: max(len(out_head) + len(body) // 2, len(out_head) // 2)])
                await writer.drain()
                reset_connection(writer)
                return None
            writer.write(data)
            await writer.drain()
            response = await http.read_response(reader)
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
            out_head = http.replace_header(http.strip_hop_by_hop(head), b"connection", b"close")
            out_head = http.replace_header(out_head, b"content-length", str(length).encode())
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
