"""Where benchmark and chaos runs write their figures: `benchmarks/results/<name>.json`.

Every file has the same envelope, so `benchmarks/report.py` can render any of them and say
beside each figure which machine ran it and when:

    {"name": ..., "date": ISO-8601 UTC, "command": the argv that ran,
     "machine": {"hostname", "cpus", "python", "platform"}, "results": {...}}
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    """What ran the benchmark: enough to tell two machines apart, nothing secret."""
    return {
        "hostname": socket.gethostname(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        # A shared machine's other work moves every figure: the report shows it beside them.
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def write_results(name: str, results: dict[str, Any], path: Path | None = None) -> Path:
    """Write `results` in the shared envelope; the default path is `results/<name>.json`."""
    target = path or RESULTS_DIR / f"{name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    envelope = {
        "name": name,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "machine": machine(),
        "results": results,
    }
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(envelope, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, target)
    return target


def read_results(name: str, directory: Path = RESULTS_DIR) -> dict[str, Any]:
    """The envelope written by `write_results` (raises FileNotFoundError when never run)."""
    data: dict[str, Any] = json.loads((directory / f"{name}.json").read_text())
    return data


def add_json_option(parser: argparse.ArgumentParser, name: str) -> None:
    """`--json FILE` writes FILE; `--json` alone writes `results/<name>.json`; without it,
    nothing is written (so a quick run never replaces committed full results)."""
    parser.add_argument(
        "--json",
        type=Path,
        nargs="?",
        const=RESULTS_DIR / f"{name}.json",
        metavar="FILE",
        help=f"write the results here (alone: benchmarks/results/{name}.json)",
    )


class RunWindow:
    """When a run started and the machine's load then; `metadata()` adds where both ended.
    A shared machine's other work moves every figure, so each run's results say it."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.load_start = os.getloadavg()[0]

    def metadata(self) -> dict[str, Any]:
        return {
            "load_average_1m": {"start": self.load_start, "end": os.getloadavg()[0]},
            "elapsed_s": round(time.perf_counter() - self.started, 1),
        }


def publish(
    name: str,
    results: dict[str, Any],
    print_table: Callable[[dict[str, Any]], None],
    path: Path | None,
) -> None:
    """Print a run's table; with `--json` (`path`), write its results and say where."""
    print_table(results)
    if path:
        print(f"wrote {write_results(name, results, path)}")
