"""Asking the access rule (server/access.py) with the facts the database holds, for one device.

A `Gate` is made per request. It loads what `decide` needs about a work order (the user's
pin, the version the device was sent: server/scope/held.py) only when the answer can depend on it,
so a server in `all` mode, an admin or a legacy worker pays nothing; `enforce` turns a
refusal into the reply every route gives for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from server.access import (
    Action,
    Allowed,
    Decision,
    Nothing,
    Order,
    Owned,
    Refused,
    Viewer,
    decide,
)
from server.auth import AuthenticatedDevice
from server.db.models import WorkOrderRow
from server.db.store import Store
from server.errors import Forbidden, NotFound
from server.scope.held import held_versions, note_held
from server.scope.pins import pinned_among
from server.settings import Settings

__all__ = ["Gate", "enforce", "gate_for", "order_columns"]

#: No device has this id (they count from 1): "another device's".
_SOMEONE_ELSE = 0


def order_columns(row: WorkOrderRow | Mapping[str, Any]) -> Mapping[str, Any]:
    """The columns the rule reads, from a model row or a column mapping."""
    if isinstance(row, Mapping):
        return row
    return {"assignee": row.assignee, "team": row.team, "created_by": row.created_by}


def enforce(decision: Decision) -> None:
    """Raise the domain error for anything but `Allowed` (server/http.py answers it)."""
    if isinstance(decision, Refused):
        raise Forbidden()
    if not isinstance(decision, Allowed):
        raise NotFound()


@dataclass
class Gate:
    """One device's questions about the things one request touches."""

    store: Store
    viewer: Viewer
    _pinned: set[str] = field(default_factory=set)
    _held: dict[str, int] = field(default_factory=dict)
    _loaded: set[str] = field(default_factory=set)
    _pending: dict[str, int] = field(default_factory=dict)

    @property
    def scoped(self) -> bool:
        """Whether answers depend on the device's scope (a worker in scope mode)."""
        return not self.viewer.everywhere

    def load(self, entity_ids: Iterable[str]) -> None:
        """Read pins and held versions of these work orders at once (a batch's)."""
        wanted = sorted(set(entity_ids) - self._loaded)
        if not self.scoped or not wanted:
            return
        self._pinned.update(pinned_among(self.store, self.viewer.user, wanted))
        self._held.update(held_versions(self.store, self.viewer.device_id, wanted))
        self._loaded.update(wanted)

    def order(
        self,
        action: Action,
        entity_id: str,
        row: WorkOrderRow | Mapping[str, Any] | None,
        base_version: int | None = None,
    ) -> Decision:
        """The rule's answer for `action` on the work order `entity_id` (`row` None: none)."""
        if row is None:
            return decide(self.viewer, action, Order(None))
        if not self.scoped:
            return decide(self.viewer, action, Order(order_columns(row)))
        self.load([entity_id])
        target = Order(
            order_columns(row),
            pinned=entity_id in self._pinned,
            held=self._held.get(entity_id),
            base_version=base_version,
        )
        return decide(self.viewer, action, target)

    def owned(self, action: Action, owner: int | None) -> Decision:
        return decide(self.viewer, action, Owned(owner))

    def reads_others(self, action: Action) -> bool:
        """Whether the rule lets the device take `action` on other devices' things."""
        return isinstance(decide(self.viewer, action, Owned(_SOMEONE_ELSE)), Allowed)

    def general(self, action: Action) -> Decision:
        return decide(self.viewer, action, Nothing())

    def sent(self, versions: Mapping[str, int] | Sequence[tuple[str, int]]) -> None:
        """The device is sent these versions (scoped workers only): later questions in this
        request know it at once, and `flush` records it."""
        if not self.scoped:
            return
        pairs = dict(versions)
        self.load(pairs)
        for entity_id, version in pairs.items():
            self._held[entity_id] = max(version, self._held.get(entity_id, version))
            self._pending[entity_id] = max(version, self._pending.get(entity_id, version))

    def sent_reply(self, body: Mapping[str, Any]) -> None:
        """The device is sent the record a reply carries (`record`, or a 409's `current`)."""
        record = body.get("record") or body.get("current")
        if isinstance(record, Mapping) and "id" in record and "version" in record:
            self.sent({str(record["id"]): int(record["version"])})

    def flush(self) -> None:
        """Record what `sent` noted (in the caller's transaction, if there is one)."""
        if self._pending:
            note_held(self.store, self.viewer.device_id, self._pending)
            self._pending = {}

    def forget_pending(self) -> None:
        """A transaction that noted versions rolled back: those replies were never sent."""
        self._pending = {}
        self._held.clear()
        self._pinned.clear()
        self._loaded.clear()


class _Server(Protocol):
    """What a gate needs of the server (`server.http.ServerContext` has it)."""

    @property
    def store(self) -> Store: ...

    @property
    def settings(self) -> Settings: ...


def gate_for(context: _Server, device: AuthenticatedDevice) -> Gate:
    return Gate(context.store, Viewer.of(device, context.settings))
