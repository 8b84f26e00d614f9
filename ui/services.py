"""What the view-models are given: the store, its executor, the bridge, and the sync engine.

The engine is optional: screenshots and view-model tests run without one, and the status bar
then says sync is not running instead of pretending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from app.store.store import Store
from ui.bridge import Bridge
from ui.tasks import Executor

if TYPE_CHECKING:
    from ui.viewmodels.review import ReviewClient

__all__ = ["EngineControl", "Services"]


class EngineControl(Protocol):
    """The part of `app.sync.engine.SyncEngine` the UI drives."""

    def wake(self) -> None: ...

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
