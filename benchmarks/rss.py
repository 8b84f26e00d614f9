"""Resident memory of other processes, sampled in a thread: peak growth over a baseline.

    with RssSampler({"device": child.pid, "server": server.pid}) as sampler:
        sampler.mark()            # the baseline: each process's RSS now
        ...                       # the work
    sampler.growth_mib()          # {"device": peak - baseline, "server": ...} in MiB

VmRSS is read from /proc/<pid>/status every `interval_s` (20 ms by default), so a peak
shorter than that can be missed; the kernel's own high-water mark (VmHWM) cannot be reset by
another process, so it would include everything before the baseline.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType

__all__ = ["RssSampler", "rss_kib"]

MIB = 1024 * 1024


def rss_kib(pid: int) -> int | None:
    """The process's VmRSS in KiB, None once it has exited."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None  # a zombie has no VmRSS line


class RssSampler:
    """Samples the RSS of each named pid; `mark()` sets the baseline and resets the peaks."""

    def __init__(self, pids: dict[str, int], interval_s: float = 0.02) -> None:
        self.pids = dict(pids)
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._baseline: dict[str, int] = {}
        self._peak: dict[str, int] = {}
        self._samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self._sample()  # the last instant counts too

    def mark(self) -> None:
        with self._lock:
            now = {name: rss_kib(pid) for name, pid in self.pids.items()}
            self._baseline = {name: kib for name, kib in now.items() if kib is not None}
            self._peak = dict(self._baseline)
            self._samples = 0

    def _sample(self) -> None:
        with self._lock:
            if not self._baseline:
                return
            for name, pid in self.pids.items():
                kib = rss_kib(pid)
                if kib is not None and name in self._peak:
                    self._peak[name] = max(self._peak[name], kib)
            self._samples += 1

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def baseline_mib(self) -> dict[str, float]:
        with self._lock:
            return {name: round(kib * 1024 / MIB, 1) for name, kib in self._baseline.items()}

    def peak_mib(self) -> dict[str, float]:
        with self._lock:
            return {name: round(kib * 1024 / MIB, 1) for name, kib in self._peak.items()}

    def growth_mib(self) -> dict[str, float]:
        """Peak minus baseline per process since the last `mark()`, in MiB."""
        with self._lock:
            return {
                name: round((self._peak[name] - self._baseline[name]) * 1024 / MIB, 1)
                for name in self._baseline
            }

    @property
    def samples(self) -> int:
        with self._lock:
            return self._samples
