"""Whether a results file is older than the code it measures, asked of git (report.py --check).

Each benchmark declares the code its figures depend on in a module-level tuple
``MEASURES = ("server/", "benchmarks/server_bench.py", ...)``, paths from the repository root
(the chaos runs declare theirs in tests/chaos/helpers.py). A results file records the commit it
measured (``results_file.measured_code``). It is stale when the last commit that changed a
declared path is not that commit or one of its ancestors: the code changed after the run, so
the figures describe code that no longer exists. Committing results later never makes them
fresh, and a results-only commit never makes them stale.

Without git, outside a clone, or in a shallow clone (whose history stops short), staleness
cannot be told: `GitUnavailable` says why, and the report says so instead of guessing.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["DECLARED_IN", "GitUnavailable", "declared_paths", "stale_reason"]

#: Where each results file's benchmark declares `MEASURES`.
DECLARED_IN = {
    "queue_bench": "benchmarks/queue_bench.py",
    "sync_bench": "benchmarks/sync_bench.py",
    "cli_sync_bench": "benchmarks/cli_sync_bench.py",
    "server_bench": "benchmarks/server_bench.py",
    "ui_bench": "benchmarks/ui_bench.py",
    "upload_bench": "benchmarks/upload_bench.py",
    "scope_bench": "benchmarks/scope_bench.py",
    "search_bench": "benchmarks/search_bench.py",
    "storm_bench": "benchmarks/storm_bench.py",
    "console_bench": "benchmarks/console_bench.py",
    "chaos": "tests/chaos/helpers.py",
    "chaos-large": "tests/chaos/helpers.py",
    "chaos-uploads": "tests/chaos/helpers.py",
}


class GitUnavailable(Exception):
    """Git cannot say what changed when (not installed, not a clone, or a shallow clone)."""


def declared_paths(name: str, root: Path = ROOT) -> tuple[str, ...]:
    """The `MEASURES` tuple of `name`'s benchmark, read from its source (never imported: a
    benchmark imports the whole product, and a check must not run it)."""
    source = root / DECLARED_IN[name]
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "MEASURES" for target in node.targets
        ):
            paths = ast.literal_eval(node.value)
            if isinstance(paths, tuple) and paths and all(isinstance(p, str) for p in paths):
                return paths
    raise ValueError(f"{DECLARED_IN[name]} declares no MEASURES tuple of paths")


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as error:
        raise GitUnavailable(f"git cannot run ({error})") from None


def _history(root: Path) -> None:
    """Raise GitUnavailable unless `root` is a full clone."""
    shallow = _git(root, "rev-parse", "--is-shallow-repository")
    if shallow.returncode != 0:
        raise GitUnavailable(f"{root} is not a git clone ({shallow.stderr.strip()})")
    if shallow.stdout.strip() == "true":
        raise GitUnavailable(
            "a shallow clone: its history stops short, so the last change to a benchmark's "
            "code is unknown (`git fetch --unshallow` to check)"
        )


def stale_reason(name: str, envelope: dict[str, Any], root: Path = ROOT) -> str | None:
    """Why results file `name` (its `envelope`) is older than the code it measures, or None."""
    commit = envelope.get("commit")
    if not commit:
        return "records no commit it measured (written before results carried one)"
    _history(root)
    paths = declared_paths(name, root)
    last = _git(root, "log", "-1", "--format=%H %s", "--", *paths)
    if last.returncode != 0:
        raise GitUnavailable(f"git log failed: {last.stderr.strip()}")
    if not last.stdout.strip():
        return None  # none of the paths has a commit yet
    changed, subject = (last.stdout.strip().split(" ", 1) + [""])[:2]
    ancestor = _git(root, "merge-base", "--is-ancestor", changed, commit)
    if ancestor.returncode == 0:
        return None
    if ancestor.returncode == 1:
        return (
            f"measured at commit {commit[:10]}, but its code ({', '.join(paths)}) changed "
            f"after that in {changed[:10]} ({subject!r})"
        )
    return f"measured at commit {commit[:10]}, which this clone does not have"
