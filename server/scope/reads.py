"""What a device may read outside its feed: its scope, and whether one work order is in it.

A worker reads every work order by id or search, unless `Settings.worker_search == "scope"`:
then only those its scope holds (a read outside it is a 404, as for a missing one). An admin
always reads everything.
"""

from __future__ import annotations

from server.auth import AuthenticatedDevice
from server.db.models import WorkOrderRow
from server.db.store import Store
from server.scope.feed import pinned_among
from server.scope.keys import Scope
from server.settings import Settings

__all__ = ["device_scope", "may_read", "reads_restricted"]


def device_scope(device: AuthenticatedDevice) -> Scope:
    return Scope(device.id, device.user, device.team, admin=device.sees_everything)


def reads_restricted(settings: Settings, device: AuthenticatedDevice) -> bool:
    """Whether this device's reads outside its feed are limited to its scope."""
    return not device.sees_everything and settings.worker_search == "scope"


def may_read(
    store: Store, settings: Settings, device: AuthenticatedDevice, row: WorkOrderRow
) -> bool:
    """Whether the device may read this work order outside its feed."""
    if not reads_restricted(settings, device):
        return True
    pinned = bool(pinned_among(store, device.user, [row.id]))
    return device_scope(device).holds(
        {"assignee": row.assignee, "team": row.team, "created_by": row.created_by}, pinned
    )
