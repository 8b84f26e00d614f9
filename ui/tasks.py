"""Async work started from Qt slots: owned, awaited on close, never fire-and-forget.

A `TaskOwner` belongs to one view-model. Slots call `owner.start(coro)`; the task is kept until
it finishes, its failure is reported (not swallowed), and `aclose()` cancels what is left —
the UI's abort path. `Executor` is the protocol of the core's single-writer executor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

from app.store.errors import StoreError
from ui.crash import report

__all__ = ["Executor", "TaskOwner"]

T = TypeVar("T")


class Executor(Protocol):
    """`app/executor.py`'s StoreExecutor: blocking store calls, one at a time, off the loop."""

    async def run(self, fn: Callable[..., T], *args: Any) -> T: ...


class TaskOwner:
    """Keeps the tasks a view-model started; reports failures to `on_error`.

    A StoreError (storage full, busy, unreadable...) is a condition of the device, not a bug:
    with `on_condition` it is told to the person in words (a toast), not in the bug dialog.
    """

    def __init__(
        self,
        on_error: Callable[[BaseException], None] | None = None,
        *,
        on_condition: Callable[[str], None] | None = None,
    ) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._on_error = on_error
        self._on_condition = on_condition

    def start(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task[Any]:
        loop = asyncio.get_event_loop_policy().get_event_loop()
        task = loop.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return  # a cancelled operation is silent
        exc = task.exception()
        if exc is None:
            return
        if isinstance(exc, StoreError) and self._on_condition is not None:
            self._on_condition(str(exc))
        elif self._on_error is not None:
            self._on_error(exc)
        else:
            report(exc)

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    async def wait_idle(self) -> None:
        """Until every task started so far has finished (tests, screenshots)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)
