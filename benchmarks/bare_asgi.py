"""The HTTP floor of `server_bench.py`: an ASGI app that does nothing, served as the server is.

It reads the request body and answers `{"status": "ok"}` to every request, under the same
uvicorn, protocol (`server.listen.NoDelayHttpToolsProtocol`: httptools, Nagle off) and event
loop as `fieldsync-server serve`, in its own process. What a request costs here is what any
endpoint costs before it does anything: uvicorn's parse and write, the loop, the client. With
`h11`, uvicorn parses with h11 (Python) instead, as the server did before: the difference is
what the parser costs per request. With `raw DB_URL`, each request also writes the raw
driver's rows for the create(s) it carries (benchmarks/raw_writer.py) in one worker thread,
as an endpoint would, and a batch is answered with the replies those rows stored, as the batch
endpoint answers: the floor of any server of this stack doing the store's work, before
authentication, validation, logging and metrics.

    python benchmarks/bare_asgi.py PORT [served|h11|raw DB_URL]
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import orjson
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from raw_writer import RawWriter  # noqa: E402

from server.listen import NoDelayH11Protocol, listening_socket, uvicorn_config  # noqa: E402

_BODY = b'{"status":"ok"}'
_HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"15")]
#: Set for `raw DB_URL`: the rows of each request's create are written through it.
_writer: RawWriter | None = None


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":  # lifespan: nothing to set up
        message = await receive()
        while message["type"] != "lifespan.shutdown":
            await send({"type": message["type"] + ".complete"})
            message = await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    more, body = True, b""
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    reply, headers = _BODY, _HEADERS
    if _writer is not None and body:
        request = orjson.loads(body)
        batch = request.get("mutations")  # a batch: answered with the replies the rows stored
        if batch is not None:
            group = [(item["idempotency_key"], item["entity_id"]) for item in batch]
        else:
            group = [(dict(scope["headers"]).get(b"idempotency-key", b"").decode(),
                      request["entity_id"])]  # fmt: skip
        stored = await asyncio.get_running_loop().run_in_executor(None, _writer.write, group)
        if batch is not None:
            reply = _batch_reply(group, stored)
            headers = [(b"content-type", b"application/json"),
                       (b"content-length", str(len(reply)).encode())]  # fmt: skip
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": reply})


def _batch_reply(group: list[tuple[str, str]], stored: list[str]) -> bytes:
    """The batch endpoint's answer, `{"results": [{idempotency_key, status, body}, …]}`, with
    each body the reply the raw rows stored: what any server must send back."""
    items = [
        b'{"idempotency_key":%s,"status":201,"body":%s}' % (orjson.dumps(key), body.encode())
        for (key, _), body in zip(group, stored, strict=True)
    ]
    return b'{"results":[' + b",".join(items) + b"]}"


def main() -> None:
    global _writer
    sock = listening_socket("127.0.0.1", int(sys.argv[1]))  # Nagle off on either protocol
    config = uvicorn_config(app, log_level="warning")
    if sys.argv[2:3] == ["raw"]:
        from server_bench import FIELDS  # what the bench's creates carry

        _writer = RawWriter(sys.argv[3], FIELDS)
    if sys.argv[2:] == ["h11"]:
        config.http = NoDelayH11Protocol  # resolved when the server loads the config
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
