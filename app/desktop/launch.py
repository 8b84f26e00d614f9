"""The headless worker's notifications: their action starts the app on the page they name.

The worker (`fieldsync worker`) has no window; a person who taps "Open" on its notification
of a conflict expects the app on that conflict. It starts `fieldsync-gui --open TARGET` on
the same data dir and server, in a session of its own (it outlives the worker's restarts).
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.desktop.notifications import Notifier, load_notifications_enabled

__all__ = ["app_command", "open_app_on", "worker_notifier"]

log = logging.getLogger(__name__)


def app_command(data_dir: Path, server_url: str, target: str) -> list[str]:
    """The command line that opens the app on ``target``."""
    script = Path(sys.executable).parent / "fieldsync-gui"
    program = [str(script)] if script.exists() else [sys.executable, "-m", "ui.main"]
    return [*program, "--data-dir", str(data_dir), "--server", server_url, "--open", target]


def open_app_on(data_dir: Path, server_url: str, target: str) -> subprocess.Popen[bytes] | None:
    command = app_command(data_dir, server_url, target)
    try:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        log.warning("could not start the app (%s): %s", command[0], exc)
        return None


def worker_notifier(
    engine: Any, data_dir: Path, *, open_app: Callable[[Path, str, str], object] = open_app_on
) -> Notifier:
    """The worker's notifier: the setting read through its engine's executor, its actions
    opening the app (``open_app(data_dir, server_url, target)``)."""

    async def enabled() -> bool:
        return bool(await engine.executor.run(load_notifications_enabled, engine.store))

    def on_action(target: str) -> None:
        open_app(data_dir, engine.config.server_url, target)

    notifier = Notifier(enabled=enabled, on_action=on_action)
    notifier.subscribe(engine.events)
    return notifier
