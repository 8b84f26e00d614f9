"""What the fault proxy does to each request: the faults, and the plans that pick them.

A plan is any callable taking a `RequestInfo` (method, path, headers, body length) and
returning a `Fault`, built with the helpers below; `tests/chaos/proxy.py` applies it.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "DEFAULT_MIX",
    "PASS",
    "Fault",
    "ForcedFaults",
    "Plan",
    "RandomPlan",
    "RequestInfo",
    "RequestRecord",
    "ScriptedPlan",
    "cut_body",
    "delay",
    "drop_response",
    "garble",
    "refuse",
    "reset",
    "status",
    "trickle",
    "truncate",
]


@dataclass(frozen=True)
class Fault:
    """What the proxy does to one request. Build with the helpers below."""

    kind: str  # pass refuse reset cut_body drop_response delay status truncate garble trickle
    seconds: float = 0.0
    status: int = 0
    retry_after: int | None = None
    bytes_per_s: float = 0.0
    after_bytes: int = 0

    @property
    def reaches_server(self) -> bool:
        """Whether the server sees the whole request (it may apply it)."""
        return self.kind in ("pass", "drop_response", "delay", "truncate", "garble", "trickle")


PASS = Fault("pass")


def refuse() -> Fault:
    return Fault("refuse")


def reset() -> Fault:
    return Fault("reset")


def cut_body(after_bytes: int) -> Fault:
    """Forward the head and the first `after_bytes` of the body, then end the connection to
    the server (a clean close, so it gets exactly those bytes) and reset the client's. A body
    no longer than `after_bytes` passes untouched (its response comes back)."""
    if after_bytes < 0:
        raise ValueError(f"after_bytes must be >= 0, not {after_bytes}")
    return Fault("cut_body", after_bytes=after_bytes)


def drop_response() -> Fault:
    return Fault("drop_response")


def delay(seconds: float) -> Fault:
    return Fault("delay", seconds=seconds)


def status(code: int, retry_after: int | None = None) -> Fault:
    return Fault("status", status=code, retry_after=retry_after)


def truncate() -> Fault:
    return Fault("truncate")


def garble() -> Fault:
    return Fault("garble")


def trickle(bytes_per_s: float) -> Fault:
    return Fault("trickle", bytes_per_s=bytes_per_s)


@dataclass(frozen=True)
class RequestInfo:
    index: int
    method: str
    path: str
    body_bytes: int  # the declared Content-Length (or the chunked body's size)
    headers: tuple[tuple[str, str], ...] = ()  # lower-case names, in order

    def header(self, name: str) -> str | None:
        """The first value of header `name` (any case), None when absent."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key == wanted), None)


@dataclass(frozen=True)
class RequestRecord:
    at: float  # time.monotonic() when the request head arrived
    method: str
    path: str
    fault: str
    upstream_status: int | None
    #: Request-body bytes the proxy read from the client: what the client sent (a cut body
    #: counts what arrived before the cut), so resent bytes are a sum over these.
    body_bytes: int = 0
    headers: tuple[tuple[str, str], ...] = ()  # the request's, lower-case names

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((value for key, value in self.headers if key == wanted), None)


Plan = Callable[[RequestInfo], Fault]


class ScriptedPlan:
    """Faults in order (one per request), then `then` for every later request."""

    def __init__(self, faults: Sequence[Fault], then: Fault = PASS, *, paths: str = "") -> None:
        self._faults = list(faults)
        self._then = then
        self._paths = paths

    def __call__(self, info: RequestInfo) -> Fault:
        if not info.path.startswith(self._paths):
            return PASS
        return self._faults.pop(0) if self._faults else self._then


#: Relative weights of the random plan's faults (the rest of the time: pass).
DEFAULT_MIX: dict[str, float] = {
    "refuse": 1.0,
    "reset": 1.0,
    "drop_response": 2.0,
    "delay": 1.0,
    "status": 2.0,
    "truncate": 1.0,
    "garble": 1.0,
    "trickle": 0.5,
}


class RandomPlan:
    """Seeded random faults: each request is faulty with probability `rate`.

    The n-th request always draws the same fault for a given seed; which request is the n-th
    depends on timing, so a replay reproduces the fault sequence, not every interleaving.
    """

    def __init__(
        self,
        seed: int,
        rate: float,
        mix: dict[str, float] | None = None,
        *,
        max_delay_s: float = 1.5,
    ) -> None:
        self.seed = seed
        self.rate = rate
        self.mix = dict(mix or DEFAULT_MIX)
        self.max_delay_s = max_delay_s
        self._rng = random.Random(seed)
        self.counts: dict[str, int] = {}

    def __call__(self, info: RequestInfo) -> Fault:
        rng = self._rng
        fault = PASS
        if rng.random() < self.rate:
            kinds = list(self.mix)
            kind = rng.choices(kinds, weights=[self.mix[k] for k in kinds])[0]
            if kind == "delay":
                fault = delay(rng.uniform(0.05, self.max_delay_s))
            elif kind == "status":
                code = rng.choice((502, 503, 504, 429))
                fault = status(code, retry_after=1 if code in (429, 503) else None)
            elif kind == "trickle":
                fault = trickle(rng.uniform(300.0, 3000.0))
            else:
                fault = Fault(kind)
        self.counts[fault.kind] = self.counts.get(fault.kind, 0) + 1
        return fault


class ForcedFaults:
    """`plan`, except that the n-th request under `prefix` (n counted from 0, for each n in
    `at`) gets `fault`. A seeded plan may happen to draw no lost response on the path that
    matters; these make sure the run has some, whatever the seed."""

    def __init__(self, plan: Plan, prefix: str, at: Sequence[int], fault: Fault) -> None:
        self.plan = plan
        self.prefix = prefix
        self.at = frozenset(at)
        self.fault = fault
        self._seen = 0
        self._lock = threading.Lock()

    def __call__(self, info: RequestInfo) -> Fault:
        if info.path.startswith(self.prefix):
            with self._lock:
                index = self._seen
                self._seen += 1
            if index in self.at:
                return self.fault
        return self.plan(info)
