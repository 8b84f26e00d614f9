"""The server of the moment in a test that SIGKILLs it: kill, restart on the same database,
point the proxy at the new one (shared by the server-kill and the upload chaos tests)."""

from __future__ import annotations

import json
import os
import signal
import time
from urllib.parse import urlsplit

from tests.chaos.fleet import MUTATIONS
from tests.chaos.proxy import FaultProxy
from tests.support.serve import ServerProcess


class Restarts:
    """The server of the moment: SIGKILL it, start the next on the same database."""

    def __init__(self, db_url: str, proxy: FaultProxy) -> None:
        self.db_url = db_url
        self.proxy = proxy
        self.current = ServerProcess(db_url).start()
        self.log: list[str] = []
        self.kills = 0
        self.downtime_s: list[float] = []

    def upstream(self) -> tuple[str, int]:
        parts = urlsplit(self.current.base_url)
        return parts.hostname or "127.0.0.1", parts.port or 80

    def kill_and_restart(self) -> None:
        os.kill(self.current.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        # Until the next server listens, connections are refused, as at a dead server's port
        # (the proxy would otherwise accept them and drop every request: a different fault).
        self.proxy.link_down()
        self.kills += 1
        self.current.stop()  # reaps it
        self.log += self.current.lines
        self.current = ServerProcess(self.db_url).start()
        self.proxy.set_upstream(self.upstream())
        self.proxy.link_up()
        self.downtime_s.append(time.monotonic() - killed_at)

    def stop(self) -> None:
        self.current.stop()
        self.log += self.current.lines

    def mutation_ms(self) -> list[float]:
        """How long the servers so far took per mutation request (their request log)."""
        durations = []
        for line in [*self.log, *self.current.lines]:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry.get("msg") == "request" and str(entry.get("path")).startswith(MUTATIONS):
                durations.append(float(entry["duration_ms"]))
        return durations
