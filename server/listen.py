"""Listening sockets and the uvicorn setup that turn Nagle off on every accepted connection.

A response leaves uvicorn in two writes (head, then body). With Nagle on, the second waits
for the client to ACK the first, and the client delays that ACK by ~40 ms: every request on
a kept-alive connection then costs ~44 ms, while a fresh connection (still in quick-ACK mode)
answers in a few. asyncio sets `TCP_NODELAY` on an accepted socket only when the listening
socket's `proto` is `IPPROTO_TCP`, and a socket made with `socket.socket(family, SOCK_STREAM)`
(as uvicorn's own `--workers` path does) has proto 0. So the option is set three ways, each
enough on its own:

- `listening_socket` creates the socket with proto `IPPROTO_TCP`, so asyncio sets it;
- it also sets `TCP_NODELAY` on the listening socket, which Linux copies to accepted ones;
- `NoDelayHttpToolsProtocol` sets it on the accepted socket itself when uvicorn hands over
  the connection, whoever bound the listener
  (`uvicorn --http server.listen:NoDelayHttpToolsProtocol`).

Requests are parsed by httptools (C) rather than h11 (pure Python): a request's parse and
write cost about half as much CPU (benchmarks/server_bench.py measures both).
`NoDelayH11Protocol` stays for a deployment that names it.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn
from uvicorn.protocols.http import h11_impl, httptools_impl

__all__ = [
    "NoDelayH11Protocol",
    "NoDelayHttpToolsProtocol",
    "listening_socket",
    "set_nodelay",
    "uvicorn_config",
]

_TCP_FAMILIES = (socket.AF_INET, socket.AF_INET6)


#: Connections the kernel keeps waiting for an accept (uvicorn's own default).
BACKLOG = 2048


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket whose accepted connections have Nagle off.

    It listens before the app has started, so the "listening" log line is true: a client
    that connects while the app still starts (uvicorn logs "startup complete" before it
    listens itself) waits in the backlog instead of being refused."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def set_nodelay(transport: asyncio.BaseTransport) -> None:
    """Turn Nagle off on the TCP socket under `transport` (Unix sockets have no Nagle)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in _TCP_FAMILIES and sock.type == socket.SOCK_STREAM:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _BodyKeeping:
    """WORKAROUND: uvicorn's cycle (either parser's) answers `http.disconnect` as soon as the
    connection is gone, dropping the body bytes it had already read (up to 64 KiB). A tus PATCH
    cut mid-body keeps what arrived, so those bytes are handed over first."""

    disconnected: bool
    body: bytearray
    response_complete: bool

    async def receive(self) -> Any:
        if self.disconnected and self.body and not self.response_complete:
            body, self.body = bytes(self.body), bytearray()
            return {"type": "http.request", "body": body, "more_body": True}
        return await super().receive()  # type: ignore[misc]


class _BodyKeepingH11Cycle(_BodyKeeping, h11_impl.RequestResponseCycle):
    pass


class _BodyKeepingHttpToolsCycle(_BodyKeeping, httptools_impl.RequestResponseCycle):
    pass


class NoDelayH11Protocol(h11_impl.H11Protocol):
    """uvicorn's h11 protocol, with `TCP_NODELAY` set on each connection it is given (and a
    request cut mid-body delivering every byte that arrived)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        set_nodelay(transport)
        super().connection_made(transport)

    def handle_events(self) -> None:
        super().handle_events()
        # The cycle is made here and its task starts on the next loop turn, after this.
        if type(self.cycle) is h11_impl.RequestResponseCycle:
            self.cycle.__class__ = _BodyKeepingH11Cycle


class NoDelayHttpToolsProtocol(httptools_impl.HttpToolsProtocol):
    """uvicorn's httptools protocol, with `TCP_NODELAY` set on each connection it is given
    (and a request cut mid-body delivering every byte that arrived)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        set_nodelay(transport)
        super().connection_made(transport)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        # The parser calls this when a request's head is read; the cycle made here starts on
        # the next loop turn, after this (an upgrade or a refused request makes none).
        if type(self.cycle) is httptools_impl.RequestResponseCycle:
            self.cycle.__class__ = _BodyKeepingHttpToolsCycle


def uvicorn_config(app: Any, *, log_level: str | None = None, **options: Any) -> uvicorn.Config:
    """The uvicorn config every way of starting the server shares (JSON logs are ours).

    `log_level` None leaves uvicorn's loggers as the embedding program configured them."""
    return uvicorn.Config(
        app,
        http=NoDelayHttpToolsProtocol,
        log_config=None,
        access_log=False,
        log_level=log_level,
        lifespan="on",
        **options,
    )
