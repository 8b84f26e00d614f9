"""`serve --workers N` comes up on a host so busy that a worker takes seconds to import."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from benchmarks.bench_server import free_port

# Imported by every Python started with this directory on its path: a worker spawned by
# uvicorn's supervisor (multiprocessing's `--multiprocessing-fork`) sleeps past the
# supervisor's default 5 s ping before it can answer, as an import on a loaded host does.
_SLOW_WORKER = """
import sys, time
if "--multiprocessing-fork" in sys.orig_argv:
    time.sleep(8)
"""


def test_workers_that_start_slowly_are_not_killed(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(_SLOW_WORKER)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    command = [
        sys.executable, "-m", "server.cli", "serve", "--db",
        f"sqlite:///{tmp_path / 'server.sqlite3'}", "--port", str(port), "--workers", "2",
    ]  # fmt: skip
    log = (tmp_path / "server.log").open("wb")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        answered = None
        deadline = time.monotonic() + 60
        while answered is None and time.monotonic() < deadline:
            try:
                answered = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code
            except httpx.HTTPError:
                time.sleep(0.2)
        died = (tmp_path / "server.log").read_text().count("died")
        assert (answered, died) == (200, 0)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
