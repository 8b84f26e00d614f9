"""What the view-models are given: the store, its executor, the bridge, the core operations
and the sync engine.

The engine is optional: screenshots and view-model tests run without one, and the status bar
then says sync is not running instead of pretending.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from app.attachments import AttachmentOperations
from app.events import EventBus
from app.operations import Operations
from app.states import Connectivity
from app.store.store import Store
from app.sync.sync_now import SyncReport
from ui.bridge import Bridge
from ui.tasks import Executor

if TYPE_CHECKING:
    from app.sync.scope import Finder
    from ui.viewmodels.review import ReviewClient

__all__ = ["EngineControl", "Services", "SyncReport"]


class EngineControl(Protocol):
    """The part of `app.sync.engine.SyncEngine` the UI drives. Not `wake`: the engine
    wakes itself on the `OpChanges` of an operation that changed the queue."""

    async def sync_now(self) -> SyncReport: ...

    def set_sync_on_metered(self, enabled: bool) -> None: ...

    def revalidate(self, entity_id: str) -> None: ...

    def set_os_hint(self, online: bool | None, metered: bool = False) -> None: ...

    def health(self) -> dict[str, Any]: ...


@dataclass
class Services:
    store: Store
    executor: Executor
    bridge: Bridge
    engine: EngineControl | None = None
    server_url: str = ""
    #: The server's review queue, for the admin inbox (None: no server in this window).
    review_client: ReviewClient | None = None
    #: The server's organisation-wide search and pins, `app.sync.scope.Finder` (None: no
    #: server in this window).
    finder: Finder | None = None
    #: The wall clock the screens word ages and countdowns by (a fake one in tests).
    clock: Callable[[], float] = time.time
    #: Core writes; built over the bridge's bus when not given (its OpChanges reach the UI).
    operations: Operations = field(default=None)  # type: ignore[assignment]
    #: Photos and files of work orders (attach, list, retry, remove), built like `operations`.
    attachments: AttachmentOperations = field(default=None)  # type: ignore[assignment]

    @property
    def online(self) -> bool:
        """The engine last said the server answers."""
        return self.bridge.connectivity in (Connectivity.ONLINE, Connectivity.DEGRADED)

    def __post_init__(self) -> None:
        if self.operations is None:
            if self.bridge.bus is None:
                self.bridge.attach(EventBus())
            assert self.bridge.bus is not None
            self.operations = Operations(self.store, self.executor, self.bridge.bus)
        if self.attachments is None:
            assert self.bridge.bus is not None
            self.attachments = AttachmentOperations(self.store, self.executor, self.bridge.bus)
