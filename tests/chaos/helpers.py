"""Small helpers shared by the chaos tests: devices, CLI runs, figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from server.embedded import provision_device

FIGURES_ENV = "FIELDSYNC_CHAOS_FIGURES"


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


def add_device(db_url: str, name: str, role: str = "worker") -> str:
    return provision_device(db_url, name, role)  # type: ignore[arg-type]


def new_id() -> str:
    return str(uuid.uuid4())


def record_figures(name: str, figures: dict[str, Any]) -> None:
    """Print the figures; also merge them into `$FIELDSYNC_CHAOS_FIGURES` (JSON) if set."""
    print(f"\nFIGURES {name}: {json.dumps(figures, sort_keys=True)}")
    target = os.environ.get(FIGURES_ENV)
    if not target:
        return
    path = Path(target)
    data = json.loads(path.read_text()) if path.exists() else {}
    data[name] = figures
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
