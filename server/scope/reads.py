"""A device's scope as the feed and search read it (`device_scope`).

Whether a device may read, write or attach to one work order outside its feed is the access
rule's question (server/access.py), asked on every route.
"""

from __future__ import annotations

from server.auth import AuthenticatedDevice
from server.scope.keys import Scope

__all__ = ["device_scope"]


def device_scope(device: AuthenticatedDevice) -> Scope:
    return Scope(device.id, device.user, device.team, admin=device.sees_everything)
