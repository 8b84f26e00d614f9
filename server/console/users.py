"""Office users: adding, listing, changing and removing them, and checking a password.

Passwords are hashed with argon2id (argon2-cffi's defaults: memory-hard, salted, the
parameters kept in the hash so they can be raised later). A name that is not there costs the
same hash as a wrong password, so timing does not tell which names exist.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

import argon2
import peewee as pw

from app.records import printable
from server.console.models import ConsoleTables, ConsoleUser

__all__ = [
    "ROLES",
    "OfficeUser",
    "UserExistsError",
    "add_user",
    "check_password",
    "list_users",
    "remove_user",
    "set_user",
]

UserRole = Literal["admin", "dispatcher"]
ROLES: tuple[UserRole, ...] = ("admin", "dispatcher")

_hasher = argon2.PasswordHasher()
# What an unknown name's password is checked against, so that it takes as long to refuse as a
# wrong password: `_hasher.hash("no such user")` written out, since hashing it at import cost
# every server process and command 0.2 s of CPU (test_password_hashes.py fails when
# `_hasher`'s parameters move away from it).
_NOBODY = (
    "$argon2id$v=19$m=65536,t=3,p=4$uNKUkGw2DLrf1Yund/VQjA"
    "$xfsyWV71LUMUiv68/OMc526BlZnY/SWc9gt/FtqYwrY"
)


class UserExistsError(Exception):
    """An office user with that name already exists."""


@dataclass(frozen=True)
class OfficeUser:
    id: int
    name: str
    role: UserRole
    created_at: str

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


def _user(row: ConsoleUser) -> OfficeUser:
    role: UserRole = "admin" if row.role == "admin" else "dispatcher"
    return OfficeUser(row.id, row.name, role, row.created_at)


def _check_name(name: str) -> None:
    if not name or len(name) > 100:
        raise ValueError("user name must be 1-100 characters")
    try:
        printable(name)
    except ValueError as error:
        raise ValueError(f"user name {error}") from None


def _check_password(password: str) -> None:
    if not password:
        raise ValueError("the password is empty")
    if len(password) > 1024:
        raise ValueError("the password is longer than 1024 characters")


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")


def add_user(tables: ConsoleTables, name: str, role: str, password: str) -> OfficeUser:
    _check_name(name)
    _check_role(role)
    _check_password(password)
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    try:
        row = tables.User.create(
            name=name, role=role, password_hash=_hasher.hash(password), created_at=now
        )
    except pw.IntegrityError:
        raise UserExistsError(name) from None
    return _user(row)


def list_users(tables: ConsoleTables) -> list[OfficeUser]:
    return [_user(row) for row in tables.User.select().order_by(tables.User.name)]


def find_user(tables: ConsoleTables, user_id: int) -> OfficeUser | None:
    row = tables.User.get_or_none(tables.User.id == user_id)
    return None if row is None else _user(row)


def set_user(
    tables: ConsoleTables, name: str, *, role: str | None = None, password: str | None = None
) -> OfficeUser | None:
    """Change a user's role or password; None if there is no such user. A new password
    ends the user's sessions (someone else may hold one)."""
    changes: dict[str, str] = {}
    if role is not None:
        _check_role(role)
        changes["role"] = role
    if password is not None:
        _check_password(password)
        changes["password_hash"] = _hasher.hash(password)
    users = tables.User
    row = users.get_or_none(users.name == name)
    if row is None:
        return None
    if changes:
        users.update(**changes).where(users.id == row.id).execute()
        if password is not None or role is not None:
            tables.Session.delete().where(tables.Session.user_id == row.id).execute()
        row = users.get_by_id(row.id)
    return _user(row)


def remove_user(tables: ConsoleTables, name: str) -> bool:
    """Remove a user and end their sessions; False if there is no such user."""
    users = tables.User
    row = users.get_or_none(users.name == name)
    if row is None:
        return False
    tables.Session.delete().where(tables.Session.user_id == row.id).execute()
    users.delete().where(users.id == row.id).execute()
    return True


def check_password(tables: ConsoleTables, name: str, password: str) -> OfficeUser | None:
    """The user if `password` is theirs, else None."""
    users = tables.User
    row = users.get_or_none(users.name == name) if 0 < len(name) <= 100 else None
    try:
        if row is None:
            _hasher.verify(_NOBODY, password)
            return None
        _hasher.verify(row.password_hash, password)
    except (argon2.exceptions.VerificationError, argon2.exceptions.InvalidHashError):
        return None
    if _hasher.check_needs_rehash(row.password_hash):
        users.update(password_hash=_hasher.hash(password)).where(users.id == row.id).execute()
    return _user(row)
