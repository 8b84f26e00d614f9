"""The HTTP floor of `server_bench.py`: an ASGI app that does nothing, served as the server is.

It reads the request body and answers `{"status": "ok"}` to every request, under the same
uvicorn, protocol (`server.listen.NoDelayH11Protocol`: h11, Nagle off) and event loop as
`fieldsync-server serve`, in its own process. What a request costs here is what any endpoint
costs before it does anything: uvicorn's parse and write, the loop, the client. With
`httptools`, uvicorn parses with httptools (C) instead of h11 (Python): the difference is what
h11's parse costs per request.

    python benchmarks/bare_asgi.py PORT [h11|httptools]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from server.listen import listening_socket, uvicorn_config  # noqa: E402

_BODY = b'{"status":"ok"}'
_HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"15")]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":  # lifespan: nothing to set up
        message = await receive()
        while message["type"] != "lifespan.shutdown":
            await send({"type": message["type"] + ".complete"})
            message = await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": _BODY})


def main() -> None:
    sock = listening_socket("127.0.0.1", int(sys.argv[1]))  # Nagle off on either protocol
    config = uvicorn_config(app, log_level="warning")
    if sys.argv[2:] == ["httptools"]:
        config = uvicorn.Config(app, http="httptools", log_config=None, access_log=False,
                                log_level="warning", lifespan="on")  # fmt: skip
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
