"""Every benchmark runs at its smallest scale (`--smoke`) and writes a results file that
`benchmarks/report.py` renders: a benchmark broken by a change fails here, not months later
when someone tries to measure again."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import report  # noqa: E402

#: Each benchmark and the report block its results file fills.
BLOCKS = {
    "queue_bench": "queue",
    "sync_bench": "sync",
    "cli_sync_bench": "cli-sync",
    "server_bench": "server",
    "ui_bench": "ui",
    "upload_bench": "upload",
    "scope_bench": "scope",
    "search_bench": "search",
    "storm_bench": "storm",
    "console_bench": "console",
}


def test_every_benchmark_has_a_smoke_run_here() -> None:
    scripts = {path.stem for path in BENCHMARKS.glob("*_bench.py")}
    assert scripts == set(BLOCKS)
    assert {report.BLOCKS[block].sources for block in BLOCKS.values()} == {
        (name,) for name in BLOCKS
    }


def run_and_clean_up(
    command: list[str], scratch: Path, *, timeout: float, **popen: Any
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run`, after which nothing the benchmark started is left running, even when
    it timed out: its servers and devices (its process group: a session of its own) are
    killed, and so is every PostgreSQL cluster under `scratch` (pg_ctl detaches those)."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, **popen,
    )  # fmt: skip
    out = err = None
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        for pid_file in scratch.glob("fieldsync-pg-*/data/postmaster.pid"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                # SIGQUIT: the postmaster's immediate shutdown, its backends with it.
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGQUIT)
        if out is None:
            process.communicate()  # timed out: reap it, close its pipes
    return subprocess.CompletedProcess(command, process.returncode, out, err)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_a_smoke_run_writes_results_the_report_renders(name: str, tmp_path: Path) -> None:
    target = tmp_path / "results" / f"{name}.json"
    # Its PostgreSQL clusters (tests/support/postgres.py) go here. Not under tmp_path: pytest
    # keeps that to its owner (0700), and a cluster's own account (postgres, under root) must
    # reach its directory to run initdb in it.
    scratch = Path(tempfile.mkdtemp(prefix="fieldsync-smoke-"))
    scratch.chmod(0o755)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "QT_QUICK_BACKEND": "software",
           "TMPDIR": str(scratch)}  # fmt: skip
    try:
        done = run_and_clean_up(
            [sys.executable, str(BENCHMARKS / f"{name}.py"), "--smoke", "--json", str(target)],
            scratch,
            cwd=tmp_path,
            env=env,
            timeout=280,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert f"wrote {target}" in done.stdout

    envelope = json.loads(target.read_text())
    assert envelope["name"] == name
    assert envelope["command"] == f"{name}.py --smoke --json {target}"
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert envelope["commit"] == head
    assert isinstance(envelope["dirty"], bool)
    results = envelope["results"]
    mode = results["mode"] if "mode" in results else results["metadata"]["mode"]
    assert mode == "smoke"

    body, missing = report.render_block(BLOCKS[name], target.parent)
    assert missing is None, missing
    assert re.search(rf"`{name}\.py --smoke --json [^`]+` on ", body)
    assert f"commit {head[:10]}" in body
