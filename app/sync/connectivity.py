"""Connectivity: the OS's hint combined with what the server really answers.

"Online" from the OS (Qt's QNetworkInformation in the UI) is a hint, never a guarantee: real
request outcomes decide. A run of network failures turns the state to offline; the worker then
stops sending jobs and probes ``/healthz`` with backoff and jitter until the server answers.
Pure state machine: the worker feeds it outcomes and asks it what to do.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from app.states import Connectivity
from app.store.backoff import BackoffPolicy, backoff_delay

__all__ = ["ConnectivityConfig", "ConnectivityDetector"]


@dataclass(frozen=True)
class ConnectivityConfig:
    #: Consecutive network failures before the worker stops sending and starts probing.
    failures_before_offline: int = 3
    probe_backoff: BackoffPolicy = BackoffPolicy(initial=1.0, base=2.0, cap=120.0, jitter=0.5)


class ConnectivityDetector:
    """States: online, offline, connecting (probing), degraded (server up, mutations failing)."""

    def __init__(self, config: ConnectivityConfig | None = None, rng: random.Random | None = None):
        self.config = config or ConnectivityConfig()
        self.rng = rng or random.Random()
        self.state: Connectivity = Connectivity.CONNECTING
        self.reason = "not tried yet"
        self.os_online: bool | None = None
        self.metered = False
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
            self._set(Connectivity.OFFLINE, "the system reports no network")
            return False
        if online and was is False:
            # Regained: try at once instead of waiting for the probe backoff.
            self._probe_attempts = 0
            self._set(Connectivity.CONNECTING, "the system reports a network")
            return True
        return False

    def network_failure(self, reason: str) -> None:
        self._network_failures += 1
        if self._network_failures >= self.config.failures_before_offline:
            self._set(Connectivity.OFFLINE, reason)

    def server_answered(self, mutations_ok: bool = True) -> None:
        """Any HTTP answer proves reachability; failing mutations mean degraded, not offline."""
        self._network_failures = 0
        self._probe_attempts = 0
        if mutations_ok:
            self._mutation_failures = 0
            self._set(Connectivity.ONLINE, "")
        else:
            self._mutation_failures += 1
            if self._mutation_failures >= 3:
                self._set(Connectivity.DEGRADED, "the server answers but refuses or fails changes")
            elif self.state != Connectivity.DEGRADED:
                self._set(Connectivity.ONLINE, "")

    def probe_failed(self, reason: str) -> None:
        self._probe_attempts += 1
        self._set(Connectivity.OFFLINE, reason)

    # -- decisions ---------------------------------------------------------------------------

    @property
    def may_send(self) -> bool:
        return self.state in (Connectivity.ONLINE, Connectivity.CONNECTING, Connectivity.DEGRADED)

    def next_probe_delay(self) -> float:
        return backoff_delay(self._probe_attempts + 1, self.config.probe_backoff, self.rng)

    def _set(self, state: Connectivity, reason: str) -> None:
        self.state = state
        self.reason = reason
