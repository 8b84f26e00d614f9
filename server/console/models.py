"""The console's own tables: office users, their sessions, failed sign-ins, its audit log."""

from __future__ import annotations

from dataclasses import dataclass

import peewee as pw

from server.db.models import _bound
from server.db.store import Store

__all__ = ["ConsoleTables", "console_tables"]


class _Base(pw.Model):
    class Meta:
        legacy_table_names = False


class ConsoleUser(_Base):
    """A person in the office: an admin (people and devices) or a dispatcher (work orders)."""

    id = pw.AutoField()
    name = pw.CharField(max_length=100, unique=True)
    role = pw.CharField(max_length=16)
    #: An argon2id hash (argon2-cffi's encoded form, parameters included).
    password_hash = pw.CharField(max_length=255)
    created_at = pw.CharField(max_length=40)


class ConsoleSession(_Base):
    """A signed-in browser; the cookie holds the token, the table only its sha256."""

    token_hash = pw.CharField(max_length=64, primary_key=True)
    user_id = pw.IntegerField(index=True)
    #: The value every state-changing form of this session must carry.
    csrf_token = pw.CharField(max_length=64)
    created_at = pw.DoubleField()
    expires_at = pw.DoubleField(index=True)


class SignInFailure(_Base):
    """One refused sign-in, counted per name and per address to slow down guessing."""

    id = pw.AutoField()
    name = pw.CharField(max_length=100, index=True)
    address = pw.CharField(max_length=64, index=True)
    at = pw.DoubleField(index=True)


class ConsoleAudit(_Base):
    """Append-only: what an office user did in the console (devices, work orders)."""

    id = pw.AutoField()
    at = pw.DoubleField(index=True)
    actor = pw.CharField(max_length=100, index=True)
    #: e.g. `device.add`, `device.revoke`, `work_order.reassign`.
    action = pw.CharField(max_length=40, index=True)
    #: The device's name or the work order's id.
    subject = pw.CharField(max_length=200, index=True)
    #: JSON: what changed (never a token).
    detail = pw.TextField(default="{}")


@dataclass(frozen=True)
class ConsoleTables:
    User: type[ConsoleUser]
    Session: type[ConsoleSession]
    SignInFailure: type[SignInFailure]
    Audit: type[ConsoleAudit]


def console_tables(store: Store) -> ConsoleTables:
    """The console's tables bound to `store`'s database, created if missing."""
    tables = ConsoleTables(
        User=_bound(ConsoleUser, store.db),
        Session=_bound(ConsoleSession, store.db),
        SignInFailure=_bound(SignInFailure, store.db),
        Audit=_bound(ConsoleAudit, store.db),
    )
    with store.db.connection_context(), store.db.atomic():
        store.db.create_tables(
            [tables.User, tables.Session, tables.SignInFailure, tables.Audit], safe=True
        )
    return tables
