"""The server of the moment in a test that SIGKILLs it: kill, restart on the same database,
point the proxy at the new one (shared by the server-kill and the upload chaos tests)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from urllib.parse import urlsplit

from tests.chaos.fleet import MUTATIONS
from tests.chaos.proxy import FaultProxy
from tests.support.serve import ServerProcess


class Restarts:
    """The server of the moment: SIGKILL it, start the next on the same database.

    With ``standby``, a second server process runs beside it on the same database (and
    ``server_args``, such as a shared ``--attachments-dir``): a kill moves the proxy to the
    standby at once, so the device resumes on another process, and the killed one is
    restarted as the next standby."""

    def __init__(
        self, db_url: str, proxy: FaultProxy, *server_args: str, standby: bool = False
    ) -> None:
        self.db_url = db_url
        self.proxy = proxy
        self.server_args = server_args
        self.current = ServerProcess(db_url, *server_args).start()
        self.standby = ServerProcess(db_url, *server_args).start() if standby else None
        self.log: list[str] = []
        self.kills = 0
        self.downtime_s: list[float] = []
        self._starting: threading.Thread | None = None

    def upstream(self) -> tuple[str, int]:
        parts = urlsplit(self.current.base_url)
        return parts.hostname or "127.0.0.1", parts.port or 80

    def kill_and_restart(self) -> None:
        # A kill soon after the last one finds the next standby still starting: the server
        # is then restarted in place (with the same `server_args`), so the kill still lands
        # where the test aimed it.
        if self.standby is not None:
            self._kill_and_switch()
            return
        os.kill(self.current.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        # Until the next server listens, connections are refused, as at a dead server's port
        # (the proxy would otherwise accept them and drop every request: a different fault).
        self.proxy.link_down()
        self.kills += 1
        self.current.stop()  # reaps it
        self.log += self.current.lines
        self.current = ServerProcess(self.db_url, *self.server_args).start()
        self.proxy.set_upstream(self.upstream())
        self.proxy.link_up()
        self.downtime_s.append(time.monotonic() - killed_at)

    def _kill_and_switch(self) -> None:
        self._ready()
        assert self.standby is not None
        killed = self.current
        os.kill(killed.pid, signal.SIGKILL)
        self.current, self.standby = self.standby, None
        self.proxy.set_upstream(self.upstream())
        self.kills += 1
        self.downtime_s.append(0.0)
        killed.stop()  # reaps it
        self.log += killed.lines
        # The next standby starts meanwhile: the device goes on with the other process.
        self._starting = threading.Thread(target=self._start_standby, daemon=True)
        self._starting.start()

    def _start_standby(self) -> None:
        self.standby = ServerProcess(self.db_url, *self.server_args).start()

    def _ready(self) -> None:
        if self._starting is not None:
            self._starting.join(60)
            self._starting = None

    def stop(self) -> None:
        self._ready()
        for server in (self.current, self.standby):
            if server is not None:
                server.stop()
                self.log += server.lines

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
