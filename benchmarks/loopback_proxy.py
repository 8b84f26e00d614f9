"""The harness of the loopback proxies: a listener on 127.0.0.1 served by a loop in its own thread.

    class EchoProxy(LoopbackProxy):
        thread_name = "echo-proxy"

        async def _serve(self, reader, writer):
            ...  # one client connection, on the proxy's loop

    proxy = EchoProxy(("127.0.0.1", server_port)).start()  # or: with EchoProxy(...) as proxy:
    ...  # point clients at proxy.base_url
    proxy.stop()

The three proxies of the tests and benchmarks (the fault proxy of `tests/chaos/proxy.py`, the
cutting proxy of `tests/support/cut_proxy.py`, the shaped link of `benchmarks/link_proxy.py`)
run on it, so that each serves a device in a subprocess and a client in the test's own process
alike, and each stops the same way: every connection task cancelled and every socket closed
before its loop stops, or the garbage collector later reports them unclosed (a warning, which
the suite turns into an error). It lives in `benchmarks/` because the upload benchmark needs
the shaped link, and benchmarks import no test code for it; tests import it from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine
from typing import Any, Self, TypeVar

__all__ = ["LoopbackProxy", "reset_connection"]

_T = TypeVar("_T")


def reset_connection(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a dropped link or a crashed peer does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class LoopbackProxy:
    """See the module docstring. Subclasses write `_serve`, and may widen `_shutdown`."""

    #: The name of the loop's thread, as thread dumps and profilers show it.
    thread_name = "loopback-proxy"

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = 0  # 0 until `start()`; kept, so that listening again takes the same port
        self._loop = asyncio.new_event_loop()
        # A daemon: a test or benchmark that fails before `stop()` must not hang the
        # interpreter's exit on a loop that runs forever.
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=self.thread_name, daemon=True
        )
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()  # connections `stop()` aborts
        self._tasks: set[asyncio.Future[None]] = set()  # what `stop()` cancels and awaits

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- control (any thread) --------------------------------------------------------------

    def start(self) -> Self:
        """Returns once the proxy accepts connections."""
        self._thread.start()
        self._call(self._listen())
        return self

    def stop(self) -> None:
        """Close every connection, then stop the loop and its thread, even if the closing
        fails or times out (its error is raised after)."""
        if not self._thread.is_alive():
            return
        try:
            self._call(self._shutdown())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                self._loop.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _call(self, coro: Coroutine[Any, Any, _T], timeout: float = 30.0) -> _T:
        """Run `coro` on the proxy's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # -- the loop's side ---------------------------------------------------------------------

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    def _accept(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Coroutine[Any, Any, None]:
        """Registers the connection before its task first runs, so that a shutdown that
        cancels the task before it starts still closes the connection."""
        self._open.add(writer)
        return self._tracked(reader, writer)

    async def _tracked(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            pass  # the proxy stops: asyncio would log a cancelled connection task as an error
        finally:
            self._tasks.discard(task)
            if writer.transport.is_closing():  # else `stop()` must still abort it
                self._open.discard(writer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One client connection, until it ends."""
        raise NotImplementedError

    async def _close_listener(self) -> None:
        """Stop listening, without losing a connection accepted on the way.

        WORKAROUND (CPython 3.11): a connection the loop has accepted but not yet handed to its
        protocol when `Server.close()` comes cannot attach to the closed server: asyncio drops
        its transport without closing it or saying so, and the garbage collector reports it
        unclosed later, failing whatever test runs then. So the listening sockets stop
        accepting first, the connections already accepted reach `_accept` on the next turns
        (to be closed with the others), and only then does the server close."""
        server, self._server = self._server, None
        if server is None:
            return
        loop = asyncio.get_running_loop()
        for sock in server.sockets:
            loop.remove_reader(sock.fileno())
        for _ in range(3):  # the accept task's first step, then `connection_made`
            await asyncio.sleep(0)
        server.close()

    async def _shutdown(self) -> None:
        """Stop listening, cancel every connection's tasks, then abort what is still open."""
        await self._close_listener()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in list(self._open):
            writer.transport.abort()
        await asyncio.sleep(0)  # aborted transports drop their sockets on this turn
