"""HTTP/1.1 framing for the fault proxy: just what the clients and uvicorn here speak."""

from __future__ import annotations

import asyncio

__all__ = [
    "ClientGone",
    "canned",
    "framed",
    "header_pairs",
    "header_map",
    "read_body",
    "read_exactly",
    "read_head",
    "read_response",
    "replace_header",
    "request_line",
    "strip_hop_by_hop",
]

_HOP_BY_HOP = {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"te"}
_MAX_HEAD = 64 * 1024


async def read_head(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    if len(head) > _MAX_HEAD:
        raise ValueError("head too large")
    return head[:-2]  # keep the last header's CRLF, drop the blank line


class ClientGone(Exception):
    """The client's connection ended (FIN or reset) before its body was whole."""

    def __init__(self, arrived: int) -> None:
        super().__init__(f"client gone after {arrived} body bytes")
        self.arrived = arrived


async def read_exactly(reader: asyncio.StreamReader, length: int) -> bytes:
    """`length` body bytes; `ClientGone` (saying how many came) if the connection ends."""
    body = bytearray()
    try:
        while len(body) < length:
            block = await reader.read(min(length - len(body), 1 << 20))
            if not block:
                raise ClientGone(len(body))
            body += block
    except (ConnectionError, OSError):
        raise ClientGone(len(body)) from None
    return bytes(body)


def header_map(head: bytes) -> dict[bytes, bytes]:
    found: dict[bytes, bytes] = {}
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            found[name.strip().lower()] = value.strip()
    return found


async def read_body(reader: asyncio.StreamReader, headers: dict[bytes, bytes]) -> bytes:
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


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bytes]:
    head = await read_head(reader)
    if head is None:
        raise ConnectionError("upstream closed without a response")
    code = int(head.split(b" ", 2)[1])
    headers = header_map(head)
    if code in (204, 304) or b"content-length" in headers or b"transfer-encoding" in headers:
        body = b"" if code in (204, 304) else await read_body(reader, headers)
    else:
        body = await reader.read()
    return code, strip_hop_by_hop(head), body


def header_pairs(head: bytes) -> tuple[tuple[str, str], ...]:
    pairs = header_map(head).items()
    return tuple((name.decode("latin-1"), value.decode("latin-1")) for name, value in pairs)


def request_line(head: bytes) -> tuple[str, str]:
    method, target, _ = head.split(b"\r\n", 1)[0].split(b" ", 2)
    return method.decode("ascii"), target.decode("latin-1").split("?", 1)[0]


def strip_hop_by_hop(head: bytes) -> bytes:
    lines = head.split(b"\r\n")
    kept = [lines[0]]
    for line in lines[1:]:
        name = line.partition(b":")[0].strip().lower()
        if line and name not in _HOP_BY_HOP and name != b"content-length":
            kept.append(line)
    return b"\r\n".join(kept) + b"\r\n"


def replace_header(head: bytes, name: bytes, value: bytes) -> bytes:
    lines = [
        line
        for line in head.rstrip(b"\r\n").split(b"\r\n")
        if line.partition(b":")[0].strip().lower() != name
    ]
    lines.append(name + b": " + value)
    return b"\r\n".join(lines) + b"\r\n"


def framed(head: bytes, body: bytes) -> bytes:
    head = replace_header(head, b"content-length", str(len(body)).encode())
    return head + b"\r\n" + body


_REASONS = {429: b"Too Many Requests", 502: b"Bad Gateway", 503: b"Service Unavailable",
            504: b"Gateway Timeout"}  # fmt: skip


def canned(code: int, retry_after: int | None) -> bytes:
    """An answer from a middlebox, not the server: plain HTML, like a reverse proxy's."""
    body = b"<html><body><h1>%d</h1></body></html>" % code
    head = b"HTTP/1.1 %d %s\r\ncontent-type: text/html\r\n" % (code, _REASONS.get(code, b"Err"))
    if retry_after is not None:
        head += b"retry-after: %d\r\n" % retry_after
    return framed(head, body)
