"""Connectivity: the OS's hint combined with what the server really answers.

"Online" from the OS (Qt's QNetworkInformation in the UI) is a hint, never a guarantee: real
request outcomes decide, and a server that answers while the OS says "no network" proves the
OS wrong. The state starts as connecting and leaves it at the server's first answer (online)
or first failure (unreachable). Once online, a network failure stops sending at once and asks
``/healthz`` after the probe's first delay (about a second): a single lost reply costs one
probe and does not flip the state, while a server that went away shows as unreachable as soon
as that probe fails, not after the backoff of the failed job (which may be minutes). A run of
``failures_before_offline`` failures makes it unreachable without waiting for the probe. While
probing, the worker sends no jobs; it probes with backoff and jitter until the server answers.
Pure state machine: the worker feeds it outcomes and asks it what to do. Signed out and
paused are the engine's to add (`app.sync.status`): they are not facts about the network.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

from app.states import Connectivity
from app.store.backoff import BackoffPolicy, backoff_delay

__all__ = ["ConnectivityConfig", "ConnectivityDetector"]


@dataclass(frozen=True)
class ConnectivityConfig:
    #: Consecutive network failures that make the server unreachable without waiting for the
    #: probe (the first failure already stops sending and starts probing).
    failures_before_offline: int = 3
    probe_backoff: BackoffPolicy = BackoffPolicy(initial=1.0, base=2.0, cap=120.0, jitter=0.5)


class _Server(Enum):
    UNKNOWN = "unknown"  # not asked yet since start or since the network came back
    ANSWERING = "answering"
    FAILING = "failing"


class ConnectivityDetector:
    """``state``: connecting, online, unreachable or offline (the OS says no network)."""

    def __init__(self, config: ConnectivityConfig | None = None, rng: random.Random | None = None):
        self.config = config or ConnectivityConfig()
        self.rng = rng or random.Random()
        self.reason = "not tried yet"
        self.os_online: bool | None = None
        self.metered = False
        self._server = _Server.UNKNOWN
        self._probing = False
        self._network_failures = 0
        self._probe_attempts = 0
        self._mutation_failures = 0

    # -- inputs ------------------------------------------------------------------------------

    def os_hint(self, online: bool | None, metered: bool = False) -> bool:
        """The OS says the link went up or down. Returns True if it is worth trying now."""
        was = self.os_online
        self.os_online = online
        self.metered = metered
        if online is False:
            self.reason = "the system reports no network"
            return False
        if online and was is False:
            # Regained: try at once instead of waiting for the probe backoff.
            self._probe_attempts = 0
            self._network_failures = 0
            self._probing = False
            self._server = _Server.UNKNOWN
            self.reason = "the system reports a network"
            return True
        return False

    def network_failure(self, reason: str) -> None:
        self._network_failures += 1
        # Verify at once instead of trusting "online" until the failed job's own retry.
        self._probing = True
        if (
            self._network_failures >= self.config.failures_before_offline
            or self._server is not _Server.ANSWERING
        ):
            self._server = _Server.FAILING
            self.reason = reason

    def server_answered(self, mutations_ok: bool = True) -> None:
        """Any HTTP answer proves reachability (and an OS that said "no network" wrong);
        failing mutations are counted for `health`, they do not make the server unreachable."""
        self._network_failures = 0
        self._probe_attempts = 0
        self._probing = False
        self._server = _Server.ANSWERING
        self.reason = ""
        if self.os_online is False:
            self.os_online = None
        self._mutation_failures = 0 if mutations_ok else self._mutation_failures + 1

    def probe_failed(self, reason: str) -> None:
        self._probe_attempts += 1
        self._probing = True
        self._server = _Server.FAILING
        self.reason = reason

    def resumed(self) -> None:
        """Back from a suspend: whatever the server said before the sleep is old news; ask
        it again (a probe, at once) before sending."""
        self._probing = True
        self._probe_attempts = 0
        self._network_failures = 0

    def retry_now(self) -> None:
        """A person asked to sync: probe at once, not after the backoff's next delay."""
        self._probe_attempts = 0

    def reconnecting(self) -> None:
        """Start again (a new token): connecting until the server's next answer or failure."""
        self._probe_attempts = 0
        self._network_failures = 0
        self._probing = False
        self._server = _Server.UNKNOWN
        self.reason = "connecting again"

    # -- decisions ---------------------------------------------------------------------------

    @property
    def state(self) -> Connectivity:
        if self.os_online is False:
            return Connectivity.OFFLINE
        return {
            _Server.UNKNOWN: Connectivity.CONNECTING,
            _Server.ANSWERING: Connectivity.ONLINE,
            _Server.FAILING: Connectivity.UNREACHABLE,
        }[self._server]

    @property
    def may_send(self) -> bool:
        """False while the OS says offline or after a run of failures: probe instead."""
        return self.os_online is not False and not self._probing

    @property
    def mutations_failing(self) -> bool:
        """The server answers, but refused or failed the changes of three batches in a row."""
        return self._mutation_failures >= 3

    def next_probe_delay(self) -> float:
        return backoff_delay(self._probe_attempts + 1, self.config.probe_backoff, self.rng)
