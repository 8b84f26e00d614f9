"""Devices and bearer tokens: provisioning, revocation, and authenticating a request.

Tokens are 256 random bits from `secrets`, shown once and stored only as their sha256 (a fast
hash is enough for tokens this long: nobody can brute-force 2**256). Lookup goes through the
indexed hash, and the match is confirmed with `hmac.compare_digest`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any, Literal

import peewee as pw

from app.records import printable
from server.db.store import Store
from server.scope.keys import Scope, stamp_device_scope
from server.scope.legacy import begin_legacy_end, finish_legacy_end

__all__ = [
    "AuthenticatedDevice",
    "DeviceExistsError",
    "DeviceInfo",
    "Role",
    "add_device",
    "authenticate",
    "hash_token",
    "list_devices",
    "revoke_device",
    "set_device",
]

Role = Literal["worker", "admin"]
ROLES: tuple[Role, ...] = ("worker", "admin")
TOKEN_PREFIX = "fst_"


class DeviceExistsError(Exception):
    """A device with that name is already provisioned (revoked names stay taken)."""


@dataclass(frozen=True)
class AuthenticatedDevice:
    id: int
    name: str
    role: Role
    #: The person using the device; its team ("" for none).
    user: str = ""
    team: str = ""
    #: A worker from before scopes that still sees everything (server/scope/legacy.py).
    legacy: bool = False
    #: The highest change token it pulled the feed from.
    feed_position: int = 0
    #: Its store's `Fieldsync-Install` id and that install's floor (server/scope/echoes.py).
    install_id: str = ""
    install_floor: int = 0
    #: A legacy worker's end is under way: its feed is its scope, but it reaches everything.
    ending_legacy: bool = False

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def sees_everything(self) -> bool:
        """An admin, or a legacy worker: its feed and search are the whole organisation."""
        return self.is_admin or self.legacy

    @property
    def reaches_everything(self) -> bool:
        """It may read and write every work order (server/access.py): it sees everything, or
        has not yet been told of all that left it (server/scope/legacy.py)."""
        return self.sees_everything or self.ending_legacy


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    role: str
    created_at: str
    revoked_at: str | None
    user: str = ""
    team: str = ""
    legacy: bool = False
    ending_legacy: bool = False


def _info(row: Any) -> DeviceInfo:
    return DeviceInfo(
        row.name, row.role, row.created_at, row.revoked_at, row.user_name, row.team,
        bool(row.legacy_scope), row.legacy_ending_after is not None,
    )  # fmt: skip


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _check_text(what: str, value: str, longest: int, *, empty: bool) -> None:
    if (not value and not empty) or len(value) > longest:
        low = 0 if empty else 1
        raise ValueError(f"{what} must be {low}-{longest} characters")
    try:
        printable(value)
    except ValueError as error:
        raise ValueError(f"{what} {error}") from None


def add_device(
    store: Store, name: str, role: Role, *, user: str | None = None, team: str = ""
) -> str:
    """Provision a device; return its bearer token (the only time it exists in clear).

    `user` (the person, matched against work orders' `assignee`) defaults to the name."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    _check_text("device name", name, 100, empty=False)
    user = name if user is None else user
    _check_text("user", user, 200, empty=False)
    _check_text("team", team, 100, empty=True)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    devices = store.tables.Device
    try:
        with store.db.atomic():
            devices.create(
                name=name,
                role=role,
                token_hash=hash_token(token),
                created_at=_now_iso(),
                user_name=user,
                team=team,
            )
    except pw.IntegrityError:
        raise DeviceExistsError(name) from None
    return token


def set_device(
    store: Store, name: str, *, user: str | None = None, team: str | None = None
) -> DeviceInfo | None:
    """Change who uses a device or their team; None if there is no such device.

    In the same transaction the device is shown, at new change numbers, every work order of
    the scope keys it gains or loses (server/scope/keys.py), so its next pull brings the newly
    visible ones and says `out_of_scope` for the others, without a full download. A legacy
    device (server/scope/legacy.py) stops seeing everything: it is told each work order that
    its scope does not hold, in batches of their own transactions after this one."""
    if user is not None:
        _check_text("user", user, 200, empty=False)
    if team is not None:
        _check_text("team", team, 100, empty=True)
    devices = store.tables.Device
    while True:
        found = devices.get_or_none(devices.name == name)
        if found is None:
            return None
        if found.legacy_ending_after is not None:
            # An end of its everything left under way (a killed set-device) goes first: the
            # batches stamp for the scope it began with.
            finish_legacy_end(store, found.id)
        # It reads whole keys' entries: every other writer waits (PostgreSQL), as on SQLite.
        with store.write_transaction(rescope=True) as sequence:
            row = devices.get_or_none(devices.id == found.id)
            if row is None or row.legacy_ending_after is not None:
                continue  # another set-device began one meanwhile: finish it first
            before = Scope(row.id, row.user_name, row.team, admin=False)
            row.user_name = row.user_name if user is None else user
            row.team = row.team if team is None else team
            legacy = bool(row.legacy_scope)
            devices.update(user_name=row.user_name, team=row.team).where(
                devices.id == row.id
            ).execute()
            if legacy:
                begin_legacy_end(store, row.id)
            else:
                after = Scope(row.id, row.user_name, row.team, admin=False)
                stamp_device_scope(store, before, after, sequence)
        if legacy:
            finish_legacy_end(store, row.id)
            row.legacy_scope = False
        return _info(row)


def revoke_device(store: Store, name: str) -> bool:
    """Revoke a device's token; False if no such (active) device."""
    devices, held = store.tables.Device, store.tables.HeldRecord
    with store.db.atomic():
        changed = (
            devices.update(revoked_at=_now_iso())
            .where(devices.name == name, devices.revoked_at.is_null())
            .execute()
        )
        # What it was sent only served its own edits, which it can no longer send.
        gone = devices.select(devices.id).where(devices.name == name)
        held.delete().where(held.device_id.in_(gone)).execute()
    return bool(changed)


def list_devices(store: Store) -> list[DeviceInfo]:
    devices = store.tables.Device
    return [_info(row) for row in devices.select().order_by(devices.name)]


def authenticate(store: Store, authorization: str | None) -> AuthenticatedDevice | None:
    """The device behind an `Authorization: Bearer …` header, or None (missing/bad/revoked)."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 512:
        return None
    presented = hash_token(token)
    # Hand-written: every request asks it, and peewee building the SELECT cost more than
    # the indexed lookup.
    sql = (
        f'SELECT "id", "name", "role", "token_hash", "revoked_at", "user_name", "team", '
        f'"legacy_scope", "feed_position", "install_id", "install_floor", "legacy_ending_after" '
        f'FROM "{store.tables.Device._meta.table_name}" '
        f'WHERE "token_hash" = {store.db.param}'
    )
    row = store.db.execute_sql(sql, [presented]).fetchone()
    if row is None:
        return None
    (device_id, name, role_name, token_hash, revoked_at, user, team, legacy, position, install_id,
     install_floor, ending_after) = row  # fmt: skip
    if revoked_at is not None or not hmac.compare_digest(token_hash, presented):
        return None
    role: Role = "admin" if role_name == "admin" else "worker"
    return AuthenticatedDevice(
        id=device_id, name=name, role=role, user=user, team=team, legacy=bool(legacy),
        feed_position=int(position), install_id=install_id, install_floor=int(install_floor),
        ending_legacy=ending_after is not None,
    )  # fmt: skip
