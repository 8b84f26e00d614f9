"""One delivery worker per data dir: an OS file lock (flock), released by the kernel on death."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from app.store.errors import WorkerLockHeldError

__all__ = ["WorkerLock"]

LOCK_FILENAME = "worker.lock"


class WorkerLock:
    """Held for the life of a delivery worker. Readers (status, list, the UI) never take it."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILENAME
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise WorkerLockHeldError(
                f"another Fieldsync worker (pid {holder}) is already delivering from "
                f"{self.path.parent}; it will send these edits. Stop it first to run another."
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> WorkerLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
