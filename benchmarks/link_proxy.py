"""A shaped link for the upload benchmark: a TCP proxy on 127.0.0.1 with a rate and a round trip.

    with ShapedLink(("127.0.0.1", server_port), rate_bits=20e6, rtt_s=0.05) as link:
        httpx.get(link.base_url + "/healthz")

Each direction is one link of ``rate_bits`` per second shared by every connection through the
proxy, as a phone's radio is: a byte waits its turn on that link (serialisation), then
``rtt_s / 2`` (propagation) before it is written on. A connection puts one piece (16 KiB) at a
time on its direction's link and reads the next from its socket only once that piece has
left, so the pieces of all connections take turns: a small request beside an upload waits for
at most one piece of it (a fair queue per flow, as Linux's default ``fq_codel`` gives), never
for the upload's backlog. A new connection's first bytes wait one round trip more (the TCP
handshake a real link would cost). A timer that fires late does not lose link time: a piece
right behind another starts when that one left, up to ``_SLACK_S`` in the past, so the rate
holds however coarse the loop's timers; no piece is delivered early.

The proxy runs on the loopback harness (`benchmarks/loopback_proxy.py`), so a device in a
subprocess and a client in the bench's own process use it alike; it counts connections and
bytes each way.
"""

from __future__ import annotations

import asyncio
import contextlib

from benchmarks.loopback_proxy import LoopbackProxy

__all__ = ["ShapedLink"]

_PIECE = 16 * 1024
_SLACK_S = 0.02


class _Wire:
    """One direction of the link: pieces leave one after another at the rate."""

    def __init__(self, rate_bytes: float) -> None:
        self.rate = rate_bytes
        self.free_at = 0.0  # when the last piece given to the wire has left it

    async def send(self, size: int) -> float:
        """Wait until a piece of ``size`` bytes has left; the loop time it is out at (never
        before now: a piece is not delivered earlier than the link could have)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        # Right behind the last piece (a late timer, not an idle link): it starts when that
        # one left, so the rate holds. After an idle moment it starts now.
        start = self.free_at if self.free_at >= now - _SLACK_S else now
        self.free_at = start + size / self.rate
        await asyncio.sleep(self.free_at - now)
        return max(self.free_at, loop.time())


class ShapedLink(LoopbackProxy):
    """See the module docstring. `start()` (or ``with``) returns once it accepts."""

    thread_name = "shaped-link"

    def __init__(self, upstream: tuple[str, int], *, rate_bits: float, rtt_s: float) -> None:
        super().__init__(upstream)
        self.rate_bits = rate_bits
        self.rtt_s = rtt_s
        self.connections = 0
        self.bytes_up = 0  # client to server
        self.bytes_down = 0
        self._up = _Wire(rate_bits / 8)
        self._down = _Wire(rate_bits / 8)

    # -- the loop's side ---------------------------------------------------------------------

    async def _serve(self, client_in: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        self.connections += 1
        accepted = asyncio.get_running_loop().time()
        try:
            server_in, server = await asyncio.open_connection(*self.upstream)
        except OSError:
            client.close()
            return
        try:
            async with asyncio.TaskGroup() as both:  # one way failing ends the other
                both.create_task(
                    self._carry(client_in, server, self._up, accepted + self.rtt_s, up=True)
                )
                both.create_task(self._carry(server_in, client, self._down, accepted, up=False))
        except* OSError:
            pass  # a reset: both sockets close
        except* asyncio.CancelledError:
            pass  # the proxy stops: this connection ends with it (asyncio would log it)
        finally:
            for writer in (client, server):
                writer.close()

    async def _carry(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        wire: _Wire,
        open_at: float,
        *,
        up: bool,
    ) -> None:
        """Bytes from ``source`` over ``wire``, each written to ``sink`` half a round trip
        after it left; nothing is read before ``open_at`` (the handshake)."""
        loop = asyncio.get_running_loop()
        # What has left the wire and is still propagating: at most the link's bandwidth-delay
        # product, plus what a slow reader at the far end has not taken yet.
        in_flight: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(
            maxsize=max(8, int(wire.rate * self.rtt_s / _PIECE) * 2)
        )
        arrive = asyncio.ensure_future(self._arrive(in_flight, sink))
        try:
            await asyncio.sleep(max(open_at - loop.time(), 0.0))
            while True:
                piece = await source.read(_PIECE)
                if not piece:
                    break
                left_at = await wire.send(len(piece))
                if up:
                    self.bytes_up += len(piece)
                else:
                    self.bytes_down += len(piece)
                await in_flight.put((left_at + self.rtt_s / 2, piece))
            await in_flight.put((loop.time() + self.rtt_s / 2, b""))
            await arrive
        finally:
            arrive.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await arrive

    async def _arrive(
        self, in_flight: asyncio.Queue[tuple[float, bytes]], sink: asyncio.StreamWriter
    ) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due, piece = await in_flight.get()
            await asyncio.sleep(max(due - loop.time(), 0.0))
            if not piece:
                if sink.can_write_eof():
                    sink.write_eof()
                return
            sink.write(piece)
            await sink.drain()
