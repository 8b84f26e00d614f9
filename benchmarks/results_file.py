"""Where benchmark and chaos runs write their figures: `benchmarks/results/<name>.json`.

Every file has the same envelope, so `benchmarks/report.py` can render any of them and say
beside each figure which machine ran it, when, and on which code:

    {"name": ..., "date": ISO-8601 UTC, "command": the argv that ran,
     "commit": the checked-out commit (40 hex digits; null outside a git clone),
     "dirty": whether tracked files differed from it (null outside a git clone),
     "machine": {"hostname", "cpus", "python", "platform"}, "results": {...}}

`report.py --check` fails when the code a results file measures changed after its commit
(benchmarks/staleness.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO = RESULTS_DIR.parent.parent


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


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def measured_code() -> dict[str, Any]:
    """The commit of the code a run measures, and whether tracked files differed from it
    (then the commit alone does not say what ran: commit the code first, then measure)."""
    commit = _git("rev-parse", "HEAD")
    # The results a `make bench` run has written so far are not code.
    status = ("status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks/results")
    changes = _git(*status) if commit else None
    return {"commit": commit, "dirty": None if changes is None else bool(changes)}


def write_results(name: str, results: dict[str, Any], path: Path | None = None) -> Path:
    """Write `results` in the shared envelope; the default path is `results/<name>.json`."""
    target = path or RESULTS_DIR / f"{name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    envelope = {
        "name": name,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        **measured_code(),
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


#: What `--smoke` means in every benchmark: `make test` runs each so (tests/benchmarks/).
SMOKE_HELP = (
    "the smallest run that takes every step and writes every figure, in seconds (make test "
    "runs it); its figures mean nothing"
)


def run_mode(args: argparse.Namespace) -> str:
    """`smoke`, `quick` or `full`, from a benchmark's `--smoke` and `--quick` flags."""
    if getattr(args, "smoke", False):
        return "smoke"
    return "quick" if getattr(args, "quick", False) else "full"


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
