"""A streaming TCP proxy on loopback that reads just enough HTTP/1.1 to count request bodies,
and cuts chosen PATCHes after N body bytes, as a dying field link does.

    proxy = CutProxy(("127.0.0.1", port), cuts={0: 700_000, 1: 500_000}, silent=True).start()
    ...  # a tus client uploads through proxy.base_url
    proxy.requests  # what each request sent: method, Upload-Offset, body bytes read, forwarded
    proxy.stop()

`cuts` maps the n-th PATCH (from 0) to the body bytes forwarded before its cut. At the cut the
client's connection is reset, and the server's is either closed at once (`silent=False`: it
sees the end) or left open and silent until `stop()` (`silent=True`: a link that died without
a word, which the server never sees end). Unlike tests/chaos/proxy.py it forwards as it reads
(nothing waits for a whole body) and never waits for the server before resetting the client:
the client's HEAD may reach the server while it is still receiving the cut PATCH.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from benchmarks.loopback_proxy import LoopbackProxy, reset_connection

__all__ = ["CutProxy", "Seen"]

_BLOCK = 64 * 1024


@dataclass
class Seen:
    """One request as the proxy saw it."""

    method: str
    path: str
    upload_offset: int | None
    body_read: int = 0  # bytes of its body read from the client (what the client sent)
    forwarded: int = 0  # of those, bytes passed on to the server
    cut: bool = False


class CutProxy(LoopbackProxy):
    """See the module docstring."""

    thread_name = "cut-proxy"

    def __init__(self, upstream: tuple[str, int], cuts: dict[int, int], *, silent: bool) -> None:
        super().__init__(upstream)
        self.cuts = dict(cuts)
        self.silent = silent
        self.requests: list[Seen] = []
        self._patches = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            reset_connection(writer)
            return
        self._open.add(up_writer)  # a silent upstream stays open until `stop()`
        back = asyncio.ensure_future(self._copy(up_reader, writer))
        self._tasks.add(back)
        try:
            if await self._requests(reader, up_writer, writer):
                back.cancel()  # cut: the client is gone; a silent upstream stays open
                return
            up_writer.close()
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            up_writer.close()
        with contextlib.suppress(Exception):
            await back

    async def _copy(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while block := await source.read(_BLOCK):
                sink.write(block)
                await sink.drain()
        sink.close()

    async def _requests(
        self,
        reader: asyncio.StreamReader,
        upstream: asyncio.StreamWriter,
        client: asyncio.StreamWriter,
    ) -> bool:
        """Forward requests until the client closes (False) or one is cut (True)."""
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return False
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (line.partition(":") for line in lines[1:] if line)
            }
            offset = headers.get("upload-offset")
            seen = Seen(method, path, int(offset) if offset is not None else None)
            self.requests.append(seen)
            cut_at = None
            if method == "PATCH":
                cut_at = self.cuts.get(self._patches)
                self._patches += 1
            upstream.write(head)
            remaining = int(headers.get("content-length", "0"))
            while remaining:
                block = await reader.read(min(remaining, _BLOCK))
                if not block:
                    return False
                seen.body_read += len(block)
                remaining -= len(block)
                if cut_at is not None and seen.forwarded + len(block) >= cut_at:
                    upstream.write(block[: cut_at - seen.forwarded])
                    seen.forwarded = cut_at
                    await upstream.drain()
                    seen.cut = True
                    reset_connection(client)
                    if not self.silent:
                        upstream.close()
                    return True
                upstream.write(block)
                seen.forwarded += len(block)
                await upstream.drain()
