"""Who may do what to which work order, file, upload or conflict: one rule, `decide`.

Every route under `/v1/` declares its action (`declare` in server/http.py) and asks
`decide(viewer, action, target)` about the thing it found, before it answers or writes:

- `Allowed`: go on;
- `Hidden`: answer exactly as if the thing did not exist (404 `not_found`);
- `Refused`: the device may see it but not do this (403 `forbidden`, admin-only actions).

What a worker may reach depends on the server's mode (`Settings.worker_search`):

- `all` (the default): every work order of the organisation, to read, write, attach to and
  remove files from; its feed is still its scope (server/scope/).
- `scope`: only the work orders in its scope now (assignee, team, creator, pin). Everything
  else is hidden on every route, with one exception that keeps legitimate edits: a work order
  the device *held* (server/scope/held.py records each version the server sent it) may still be
  written, deleted, attached to, stripped of a file or sent to review, with a base version no
  newer than the newest it was sent, and the 409 `current` it needs to merge that one work
  order is sent to it. Reading it again (record, files, pin) is not: it left.

An admin (and a worker from before scopes, until `set-device` has told it of every work order
that left it, see server/scope/legacy.py) reaches everything.
Uploads and conflicts belong to the device that made them (an admin reads every conflict).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from server.scope.keys import Scope

if TYPE_CHECKING:
    from server.auth import AuthenticatedDevice
    from server.settings import Settings

__all__ = [
    "ALLOWED",
    "HIDDEN",
    "REFUSED",
    "Action",
    "Allowed",
    "Decision",
    "Hidden",
    "Nothing",
    "Order",
    "Owned",
    "Refused",
    "Viewer",
    "decide",
]


class Action(StrEnum):
    """What a request does; each route declares one."""

    IDENTIFY = "identify"  # GET /v1/me
    PULL = "pull"  # GET /v1/changes (always the device's scope)
    SEARCH = "search"  # GET /v1/records?q= (the mode's reach)
    READ = "read"  # GET /v1/records/{id}
    WRITE = "write"  # POST /v1/mutations (create, update, delete), batch items
    ATTACH = "attach"  # POST /v1/uploads: a file for a work order
    UPLOAD = "upload"  # HEAD, PATCH, DELETE /v1/uploads/{id}: the device's own upload
    UPLOAD_INFO = "upload_info"  # OPTIONS /v1/uploads: what the server speaks (no device)
    READ_FILE = "read_file"  # GET /v1/attachments/{id} and its thumbnail
    DETACH = "detach"  # DELETE /v1/attachments/{id}
    PIN = "pin"  # POST /v1/pins/{id}
    UNPIN = "unpin"  # DELETE /v1/pins/{id}
    RAISE_CONFLICT = "raise_conflict"  # POST /v1/conflicts
    READ_CONFLICT = "read_conflict"  # GET /v1/conflicts, GET /v1/conflicts/{id}
    DECIDE_CONFLICT = "decide_conflict"  # POST /v1/conflicts/{id}/resolve, …/dismiss


#: Actions that change a work order or its files: a device that held it keeps them.
_EDITS = frozenset(
    {Action.WRITE, Action.ATTACH, Action.DETACH, Action.RAISE_CONFLICT},
)
#: Actions an admin alone may take.
_ADMIN_ONLY = frozenset({Action.DECIDE_CONFLICT})


@dataclass(frozen=True)
class Allowed:
    """Go on."""


@dataclass(frozen=True)
class Hidden:
    """Answer as for a thing that does not exist."""

    status: int = 404

    @property
    def body(self) -> dict[str, str]:
        return {"error": "not_found"}


@dataclass(frozen=True)
class Refused:
    """The device may not do this (and may know so)."""

    status: int = 403

    @property
    def body(self) -> dict[str, str]:
        return {"error": "forbidden"}


Decision = Allowed | Hidden | Refused
ALLOWED, HIDDEN, REFUSED = Allowed(), Hidden(), Refused()


@dataclass(frozen=True)
class Viewer:
    """The asking device, as the rule sees it."""

    device_id: int
    user: str
    team: str
    #: An admin.
    admin: bool
    #: Reaches every work order: an admin, a legacy worker, or any worker in `all` mode.
    everywhere: bool

    @classmethod
    def of(cls, device: AuthenticatedDevice, settings: Settings) -> Viewer:
        everywhere = device.reaches_everything or settings.worker_search != "scope"
        return cls(device.id, device.user, device.team, device.is_admin, everywhere)

    @property
    def scope(self) -> Scope:
        return Scope(self.device_id, self.user, self.team, admin=self.everywhere)


@dataclass(frozen=True)
class Order:
    """A work order (its columns, None when there is none) and what the device has of it."""

    row: Mapping[str, Any] | None
    #: The device's user pinned it.
    pinned: bool = False
    #: The newest version the server sent this device (server/scope/held.py), None if never.
    held: int | None = None
    #: The version the request's change is based on (None: a create, or no version).
    base_version: int | None = None


@dataclass(frozen=True)
class Owned:
    """An upload or a conflict: `owner` is the device that made it (None: there is none)."""

    owner: int | None


@dataclass(frozen=True)
class Nothing:
    """A request about no one thing (its own identity, a feed, a search, a list)."""


Target = Order | Owned | Nothing


def decide(viewer: Viewer, action: Action, target: Target) -> Decision:
    """May `viewer` take `action` on `target`? The one rule every route asks."""
    if action in _ADMIN_ONLY and not viewer.admin:
        return REFUSED
    if isinstance(target, Nothing):
        return ALLOWED
    if isinstance(target, Owned):
        if target.owner is None:
            return HIDDEN
        mine = target.owner == viewer.device_id
        return ALLOWED if mine or (viewer.admin and action is Action.READ_CONFLICT) else HIDDEN
    if target.row is None:
        return HIDDEN
    if viewer.everywhere or viewer.scope.holds(target.row, target.pinned):
        return ALLOWED
    if action in _EDITS and _held(target):
        return ALLOWED
    return HIDDEN


def _held(target: Order) -> bool:
    """The device was sent this work order, and its change is based on what it was sent."""
    if target.held is None:
        return False
    return target.base_version is None or target.base_version <= target.held
