"""What every part of the sync engine works with: the store, its executor, config, events, clock.

The engine builds one `EngineContext` and hands it to its parts (`app.sync.status`,
`app.sync.pipeline`, `app.sync.puller`), which take their members from it as `EnginePart`s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.events import EventBus
from app.executor import StoreExecutor
from app.store.store import Store
from app.sync.clock import Clock
from app.sync.config import SyncConfig

__all__ = ["EngineContext", "EnginePart"]


@dataclass(frozen=True)
class EngineContext:
    store: Store
    #: The engine's current config (it is replaced when a setting changes).
    config: Callable[[], SyncConfig]
    executor: StoreExecutor
    events: EventBus
    clock: Clock


class EnginePart:
    """A part of the engine: works on the store through the executor, publishes events."""

    def __init__(self, context: EngineContext) -> None:
        self.store = context.store
        self.config = context.config
        self.executor = context.executor
        self.events = context.events
        self.clock = context.clock
