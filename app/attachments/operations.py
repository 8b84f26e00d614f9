"""The attachment operations the UI calls: each runs on the single-writer executor and
publishes what it changed as one `OpChanges` (the screens repaint from that)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from app.attachments.model import AttachmentConfig, AttachmentView
from app.attachments.store import Attachments
from app.events import EventBus, OpChanges
from app.store.store import Store

__all__ = ["AttachmentOperations"]

T = TypeVar("T")


class Executor(Protocol):
    """What `app.executor.StoreExecutor` offers (as `app.operations` takes it)."""

    async def run(self, fn: Callable[..., T], *args: Any) -> T: ...


class AttachmentOperations:
    def __init__(
        self,
        store: Store,
        executor: Executor,
        events: EventBus,
        config: AttachmentConfig | None = None,
        initiator: str = "",
    ) -> None:
        self.store, self.config = store, config
        self.attachments = Attachments(store, config)
        self.executor = executor
        self.events = events
        self.initiator = initiator

    def by(self, initiator: str) -> AttachmentOperations:
        """The same operations, their `OpChanges` naming ``initiator`` (a screen)."""
        return AttachmentOperations(self.store, self.executor, self.events, self.config, initiator)

    def _changed(self, entity_id: str) -> None:
        self.events.publish(
            OpChanges(
                frozenset({entity_id}), queue=True, attachments=True, initiator=self.initiator
            )
        )

    async def attach(
        self, entity_id: str, path: Path, filename: str | None = None
    ) -> AttachmentView:
        """Copy a file onto a work order and queue its upload (`Attachments.attach`)."""
        view = await self.executor.run(self.attachments.attach, entity_id, path, filename)
        self._changed(view.entity_id)
        return view

    async def detach(self, attachment_id: str) -> AttachmentView:
        view = await self.executor.run(self.attachments.detach, attachment_id)
        self._changed(view.entity_id)
        return view

    async def retry_upload(self, attachment_id: str) -> AttachmentView:
        view = await self.executor.run(self.attachments.retry, attachment_id)
        self._changed(view.entity_id)
        return view

    async def list_for(self, entity_id: str) -> list[AttachmentView]:
        return await self.executor.run(self.attachments.list_for, entity_id)
