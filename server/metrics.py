"""Prometheus counters for the mutation pipeline, by device, and of the process (per process)."""

from __future__ import annotations

import threading
from collections import Counter

__all__ = ["METRIC_HELP", "Metrics"]

METRIC_HELP: dict[str, str] = {
    "fieldsync_mutations_applied_total": "Mutations applied (their single effect happened).",
    "fieldsync_idempotent_replays_total": "Duplicate requests answered from the stored response.",
    "fieldsync_idempotency_key_reused_total": "Keys reused with a different request body.",
    "fieldsync_idempotency_key_in_use_total": "Duplicates that arrived while the first ran.",
    "fieldsync_version_conflicts_total": "Mutations refused because base_version was stale.",
    "fieldsync_mutations_rejected_total": "Mutations refused as invalid, unknown or limited.",
    "fieldsync_conflicts_raised_total": "Conflicts sent to the review queue.",
    # Of the process, not of a device: a refusal is answered before the token is read.
    "fieldsync_admission_refusals_total": (
        "Device requests refused at once (429 server_busy): the process had all it may in hand."
    ),
}

#: The counters of the whole process (no device label), shown from 0 so that a rate is
#: defined before the first event.
_OF_THE_PROCESS = frozenset({"fieldsync_admission_refusals_total"})


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    """Thread-safe counters keyed by (metric, device name); device "" is the process's own."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def inc(self, metric: str, device: str = "", amount: int = 1) -> None:
        if metric not in METRIC_HELP:
            raise KeyError(metric)
        with self._lock:
            self._counts[(metric, device)] += amount

    def value(self, metric: str, device: str = "") -> int:
        with self._lock:
            return self._counts[(metric, device)]

    def render(self) -> str:
        """The Prometheus text exposition format (version 0.0.4)."""
        with self._lock:
            counts = dict(self._counts)
        lines: list[str] = []
        for metric, help_text in METRIC_HELP.items():
            lines.append(f"# HELP {metric} {help_text}")
            lines.append(f"# TYPE {metric} counter")
            if metric in _OF_THE_PROCESS and (metric, "") not in counts:
                lines.append(f"{metric} 0")
            for (name, device), count in sorted(counts.items()):
                if name == metric and not device:
                    lines.append(f"{metric} {count}")
                elif name == metric:
                    lines.append(f'{metric}{{device="{_escape(device)}"}} {count}')
        return "\n".join(lines) + "\n"
