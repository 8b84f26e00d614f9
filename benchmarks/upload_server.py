"""The sync server with a bare streaming upload endpoint beside it, in one process.

    python benchmarks/upload_server.py --db URL --port N --sink-dir DIR [--setting NAME=VALUE]

`upload_bench.py` compares the device's resumable (tus) upload with one plain HTTP PUT of the
same bytes. For the comparison to measure the protocol and not the machine, the PUT goes to the
same server process, the same event loop and the same disk: `PUT /bench/sink/{name}` streams the
body to `DIR/name` as it arrives, hashing it (sha256) and fsyncing it at the end, which is the
least any upload that verifies its bytes must do. It sits in front of the app's middleware (no
authentication, no body limit, no access log): the bare floor. Every other path goes to
`server.app.create_app(Settings(...))`, started as `fieldsync-server serve` starts it
(`server.listen`: Nagle off, uvicorn at `--log-level warning`). `--setting` sets any field of
`server.settings.Settings` (ints, floats, strings, paths), e.g. the upload size limit.

The bench-only endpoint lives here, not in `server/`: the documented API stays exactly the
production one.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvicorn  # noqa: E402
from starlette.types import ASGIApp, Receive, Scope, Send  # noqa: E402

from server.app import create_app  # noqa: E402
from server.listen import listening_socket, uvicorn_config  # noqa: E402
from server.logs import configure_logging  # noqa: E402
from server.settings import Settings  # noqa: E402

SINK_PREFIX = "/bench/sink/"


class SinkInFront:
    """`PUT /bench/sink/{name}` streamed to disk; everything else to `app`."""

    def __init__(self, app: ASGIApp, sink_dir: Path) -> None:
        self.app = app
        self.sink_dir = sink_dir

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path.startswith(SINK_PREFIX) or scope["method"] != "PUT":
            await self.app(scope, receive, send)
            return
        name = path.removeprefix(SINK_PREFIX)
        if not name or "/" in name or name.startswith("."):
            await _answer(send, 404, {"error": "not_found"})
            return
        digest = hashlib.sha256()
        size = 0
        with (self.sink_dir / name).open("wb") as out:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body = message.get("body", b"")
                out.write(body)
                digest.update(body)
                size += len(body)
                if not message.get("more_body", False):
                    break
            out.flush()
            os.fsync(out.fileno())
        await _answer(send, 200, {"size": size, "sha256": digest.hexdigest()})


async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def settings_from(db_url: str, assignments: list[str]) -> Settings:
    """`Settings(db_url, rate limit off, NAME=VALUE...)`, each value cast to its field's type."""
    types = {field.name: field.type for field in dataclasses.fields(Settings)}
    values: dict[str, Any] = {"db_url": db_url, "rate_limit_per_second": 0.0}
    for assignment in assignments:
        name, sep, text = assignment.partition("=")
        if not sep or name not in types:
            raise SystemExit(f"--setting {assignment!r}: not NAME=VALUE of a Settings field")
        kind = str(types[name])
        if "int" in kind and "float" not in kind:
            values[name] = int(text)
        elif "float" in kind:
            values[name] = float(text)
        elif "Path" in kind:
            values[name] = Path(text)
        else:
            values[name] = text
    return Settings(**values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--sink-dir", type=Path, required=True)
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    configure_logging("warning")
    logging.getLogger("server").setLevel(logging.WARNING)
    args.sink_dir.mkdir(parents=True, exist_ok=True)
    app = SinkInFront(create_app(settings_from(args.db, args.setting)), args.sink_dir)
    sock = listening_socket(args.host, args.port)
    try:
        uvicorn.Server(uvicorn_config(app, log_level="warning")).run(sockets=[sock])
    finally:
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
