"""Small helpers shared by the chaos tests: devices, CLI runs, a disk that fills, figures."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.results_file import RESULTS_DIR, write_results
from server.embedded import provision_device

#: The code these figures depend on: report.py --check fails once it changes after the
#: commit a results file measured (benchmarks/staleness.py).
MEASURES = ("tests/chaos/", "app/", "server/")
REPO = Path(__file__).resolve().parents[2]
LARGE = os.environ.get("FIELDSYNC_CHAOS_SCALE", "").lower() == "large"
RESULTS_ENV = "FIELDSYNC_CHAOS_RESULTS"


def fieldsync_command() -> list[str]:
    script = Path(sys.executable).parent / "fieldsync"
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]


def run_cli(
    data_dir: Path,
    *args: str,
    server: str | None = None,
    token: str | None = None,
    timeout: float = 120.0,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `fieldsync --data-dir D [--server URL] ARGS` with FIELDSYNC_TOKEN, capture output."""
    command = [*fieldsync_command(), "--data-dir", str(data_dir)]
    if server:
        command += ["--server", server]
    full_env = {**os.environ, **(env or {})}
    full_env.pop("FIELDSYNC_TOKEN", None)
    if token:
        full_env["FIELDSYNC_TOKEN"] = token
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=timeout, env=full_env
    )


# Since feeds are scoped, a worker receives only its person's and team's work orders. The
# chaos fleets share work orders across devices, so their devices are one person's devices
# (a person may have several): each still has its own token, queue and idempotency keys.
CREW = "crew"


def add_device(db_url: str, name: str, role: str = "worker", *, user: str | None = CREW) -> str:
    return provision_device(db_url, name, role, user=user)  # type: ignore[arg-type]


def new_id() -> str:
    return str(uuid.uuid4())


class Device:
    """One `tests.chaos.device_runner` process at a time for a data dir; SIGKILL and restart.

    Its output goes to `log_path` (default `runner.out` in the data dir; put it elsewhere when
    the data dir sits on a disk the test fills)."""

    def __init__(
        self,
        name: str,
        root: Path,
        token: str,
        plan: list[dict[str, Any]],
        seed: int,
        *,
        log_path: Path | None = None,
    ) -> None:
        self.name = name
        self.data_dir = root / name
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.token = token
        self.plan_path = (log_path.parent if log_path else self.data_dir) / f"{name}-plan.json"
        self.plan_path.write_text(json.dumps(plan))
        self.log_path = log_path or self.data_dir / "runner.out"
        self.seed = seed
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.setup_jobs = 0

    def start(self, server: str, pace: float, *extra: str) -> None:
        out = self.log_path.open("ab")
        env = {**os.environ, "FIELDSYNC_TOKEN": self.token, "PYTHONPATH": str(REPO)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.chaos.device_runner", "--data-dir", str(self.data_dir),
             "--server", server, "--plan", str(self.plan_path), "--seed", str(self.seed),
             "--pace", str(pace), "--timeout", "150", *extra],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        out.close()
        self.starts += 1

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> bool:
        """SIGKILL the runner if it still runs; True if it did."""
        if not self.running():
            return False
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)
        return True

    def wait(self, timeout: float) -> int:
        assert self.process is not None
        return self.process.wait(timeout)

    def output(self, tail: int = 3000) -> str:
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-tail:]


# -- a disk that fills up ----------------------------------------------------------------------


@contextlib.contextmanager
def small_disk(path: Path, size_bytes: int) -> Iterator[Path]:
    """A tmpfs of `size_bytes` mounted at `path` (needs root or CAP_SYS_ADMIN), so a full
    disk is a real ENOSPC, as on a phone, not a file size limit (EFBIG)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0700", "tmpfs", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        raise PermissionError(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def fill_disk(directory: Path) -> Path:
    """Write a file that takes every free byte of `directory`'s filesystem; return it."""
    filler = directory / "filler.bin"
    with filler.open("wb", buffering=0) as out:
        for chunk in (1 << 20, 1 << 12, 1):
            block = b"\0" * chunk
            while True:
                try:
                    out.write(block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    return filler


# -- figures -------------------------------------------------------------------------------------


def results_name(base: str = "chaos") -> str:
    """`base`, or `base-large` under `FIELDSYNC_CHAOS_SCALE=large`."""
    return f"{base}-large" if LARGE else base


def results_path(base: str = "chaos") -> Path | None:
    """Where `$FIELDSYNC_CHAOS_RESULTS` asks the figures to go: `1` for the committed file of
    this scale (`benchmarks/results/chaos.json`, or `chaos-large.json` under
    `FIELDSYNC_CHAOS_SCALE=large`; another `base` for another file), any other value a path;
    unset or `0`, nowhere (`make test` never rewrites committed files)."""
    wanted = os.environ.get(RESULTS_ENV, "").strip()
    if wanted in ("", "0"):
        return None
    if wanted != "1":
        return Path(wanted)
    return RESULTS_DIR / f"{results_name(base)}.json"


def record_figures(name: str, figures: dict[str, Any], *, base: str = "chaos") -> None:
    """Print the figures of one chaos run; with `$FIELDSYNC_CHAOS_RESULTS`, also merge them
    as section `name` into the results file (the other sections are kept, each with the time
    it was measured), through `benchmarks/results_file.py`. `base` names another file, for
    figures with a document block of their own."""
    print(f"\nFIGURES {name}: {json.dumps(figures, sort_keys=True)}")
    target = results_path(base)
    if target is None:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    # Chaos tests may run in several pytest-xdist workers: one merges its section at a time.
    with open(target.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            sections = dict(json.loads(target.read_text())["results"])
        except FileNotFoundError:
            sections = {}
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        sections[name] = {**figures, "scale": "large" if LARGE else "test", "measured_at": stamp}
        write_results(results_name(base), dict(sorted(sections.items())), target)
