"""Process-wide tuning by the programs' entry points: imports they never use, and the cyclic
garbage collector."""

from __future__ import annotations

import gc
import sys

__all__ = ["settle_collector", "without_httpx_cli"]

#: Container objects allocated (net) before the cyclic collector runs: a batch of 100 makes
#: thousands, nearly all freed by reference counting, so Python's 700 ran it twice a batch.
_YOUNG_OBJECTS = 10_000


def settle_collector() -> None:
    """Tune the cyclic garbage collector of a process that has built what it keeps: what
    the imports made lives as long as the process, so it is frozen and a full collection no
    longer walks it; young collections run a fourteenth as often.

    For a process's own entry point (`fieldsync-server serve`, `fieldsync sync`), never for
    code embedded in another's (the device's app embeds the server, and what is frozen is
    never collected). Measured: under the batch endpoint's load the collector's share fell
    from 0.25 to 0.05 ms of a 16 ms batch (benchmarks/server_bench.py); a full collection
    had taken 33 ms."""
    gc.freeze()
    gc.set_threshold(_YOUNG_OBJECTS, *gc.get_threshold()[1:])


def without_httpx_cli() -> None:
    """Keep httpx's own command line out of this process: importing httpx imports it (with
    rich, click and pygments) wherever those are installed, 57 ms of every `fieldsync`
    command's start here, and nothing here runs it. Marked absent before httpx is first
    imported, it is left out as httpx provides for (its `main` then says to install
    `httpx[cli]`); once httpx is in, this does nothing."""
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
