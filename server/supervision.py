"""A server worker process ends with the supervisor that started it.

`fieldsync-server serve --workers N` runs uvicorn's supervisor, which spawns the N workers
that share the listening socket. If the supervisor dies without running its shutdown (a
SIGKILL, the OOM killer), nothing tells the workers: they go on serving the port, so a
restarted server cannot bind it and a systemd unit reports "stopped" while requests are
still answered. Linux can signal a child when its parent dies (`PR_SET_PDEATHSIG`); each
worker asks for a SIGTERM, which uvicorn answers with its graceful shutdown.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys

from server.logs import log_event

__all__ = ["end_with_supervisor"]

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def end_with_supervisor(supervisor_pid: int) -> None:
    """Have this process receive SIGTERM when `supervisor_pid`, its parent, dies.

    A supervisor that died before the request was made is caught by comparing the parent:
    an orphan has been re-parented, so it terminates itself at once.
    """
    if not sys.platform.startswith("linux") or os.getpid() == supervisor_pid:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        log_event(logger, logging.WARNING, "worker not tied to its supervisor",
                  error=os.strerror(error))  # fmt: skip
        return
    if os.getppid() != supervisor_pid:
        os.kill(os.getpid(), signal.SIGTERM)
