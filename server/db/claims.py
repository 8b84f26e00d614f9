"""Idempotency claims: the `idempotency_key` rows that let a keyed request run once.

A claim whose owner crashed stays `processing` until the lease runs out, then a retry takes it
over. A server process starting up does not wait for that: every claim it finds was made before
it started, so it marks them all abandoned (`abandon_claims`), and the first retry takes each
over at once instead of hearing "in use" for the whole lease. A claim still being worked on by a
sibling process (`--workers`) loses nothing by it: if a retry takes it over, the sibling's
`done` update matches no row and its effect rolls back, so there is still one effect.

Keys are retained `idempotency_retention_seconds` (30 days by default) and pruned after:
the retention must outlive a device's longest offline period, or a retry of a request whose
response was lost before the device went offline would run again (a create would answer 409
instead of its record, an update would raise a false conflict).
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import peewee as pw

from server.db.store import ChangeSequence, Store
from server.logs import log_event
from server.settings import Settings

logger = logging.getLogger("server.idempotency")  # the name its log lines have always carried

_PROCESSING = "processing"
_DONE = "done"


@dataclass(frozen=True)
class Reply:
    """An HTTP answer: status and JSON body, plus whether it was replayed from storage."""

    status: int
    body: dict[str, Any]
    replayed: bool = False
    retry_after: int | None = None


@dataclass(frozen=True)
class IdempotentCall:
    """One keyed request; `effect` runs inside the write transaction (in its own savepoint)."""

    key: str
    request_hash: str
    effect: Callable[[ChangeSequence], Reply]


def stored_json(body: dict[str, Any]) -> str:
    """A reply's body as stored: orjson's text where it can encode it (a few times faster
    for a batch's hundreds), the standard library's where it cannot (a lone surrogate)."""
    try:
        return orjson.dumps(body).decode()
    except TypeError:
        return json.dumps(body)


class LostClaim(Exception):
    """Our claim was taken over while the effect ran; the effect must roll back."""


@dataclass(frozen=True)
class _StoredKey:
    """The parts of an `idempotency_key` row that decide how a request is answered."""

    id: int
    request_hash: str
    state: str
    claim_token: str
    claimed_at: float
    status_code: int | None
    response_body: str | None


_STORED_COLUMNS = ", ".join(
    f'"{name}"'
    for name in (
        "key", "id", "request_hash", "state", "claim_token", "claimed_at",
        "status_code", "response_body",
    )
)  # fmt: skip
_CLAIM_COLUMNS = ", ".join(
    f'"{name}"'
    for name in (
        "device_id", "key", "request_hash", "state", "claim_token", "claimed_at", "created_at",
    )
)  # fmt: skip


def _answer_existing(row: _StoredKey, request_hash: str, settings: Settings) -> Reply:
    if row.request_hash != request_hash:
        return Reply(422, {"error": "idempotency_key_reused"})
    if row.state == _DONE and row.status_code is not None:
        return Reply(row.status_code, json.loads(row.response_body or "{}"), replayed=True)
    retry = settings.in_use_retry_after_seconds
    return Reply(409, {"error": "idempotency_key_in_use"}, retry_after=retry)


# The claim and the lookups below are hand-written SQL: for a 500-item batch, peewee spent more
# time building the multi-row INSERT and turning rows into models than the database took.


def _key_table(store: Store) -> str:
    return f'"{store.tables.IdempotencyKey._meta.table_name}"'


def _insert_claims(
    store: Store, device_id: int, calls: Sequence[IdempotentCall], token: str, now: float
) -> dict[str, int]:
    """`processing` rows for keys not stored yet (the unique (device, key) index decides
    races): the row id of each key this inserted."""
    width = _CLAIM_COLUMNS.count(",") + 1
    size = store.rows_per_statement(width)
    # In key order: on PostgreSQL an insert waits for a concurrent uncommitted insert of the
    # same key, so two overlapping batches claiming in their own orders could deadlock.
    ordered = sorted(calls, key=lambda call: call.key)
    inserted: dict[str, int] = {}
    for start in range(0, len(ordered), size):
        chunk = ordered[start : start + size]
        sql = (
            f"INSERT INTO {_key_table(store)} ({_CLAIM_COLUMNS}) "
            f"VALUES {store.values_list(len(chunk), width)} ON CONFLICT DO NOTHING "
            'RETURNING "key", "id"'
        )
        params: list[Any] = []
        for call in chunk:
            params += [device_id, call.key, call.request_hash, _PROCESSING, token, now, now]
        inserted.update(store.db.execute_sql(sql, params).fetchall())
    return inserted


def _stored_keys(store: Store, device_id: int, keys: Sequence[str]) -> dict[str, _StoredKey]:
    found: dict[str, _StoredKey] = {}
    size = store.rows_per_statement(1) - 1  # one parameter is the device
    for start in range(0, len(keys), size):
        chunk = keys[start : start + size]
        marks = store.marks(len(chunk))
        sql = (
            f"SELECT {_STORED_COLUMNS} FROM {_key_table(store)} "
            f'WHERE "device_id" = {store.db.param} AND "key" IN ({marks})'
        )
        for key, *values in store.db.execute_sql(sql, [device_id, *chunk]).fetchall():
            found[key] = _StoredKey(*values)
    return found


def claim_keys(
    store: Store, device_id: int, calls: Sequence[IdempotentCall], settings: Settings
) -> tuple[dict[str, tuple[int, str]], dict[str, Reply]]:
    """Phase 1: returns (owned key -> (row id, claim token), answered key -> reply)."""
    now = settings.clock()
    token = secrets.token_hex(16)
    owned: dict[str, tuple[int, str]] = {}
    answered: dict[str, Reply] = {}
    with store.db.atomic():
        inserted = _insert_claims(store, device_id, calls, token, now)
        # Only keys stored before need reading back (none, for a device's fresh writes).
        older = [call.key for call in calls if call.key not in inserted]
        found = _stored_keys(store, device_id, older) if older else {}
    stale_before = now - settings.idempotency_lease_seconds
    for call in calls:
        row = found.get(call.key)
        if call.key in inserted:
            owned[call.key] = (inserted[call.key], token)
        elif row is None:
            # Released (its effect failed) or pruned by another process between this claim's
            # insert and its read (PostgreSQL reads each statement's latest commit): in use.
            retry = settings.in_use_retry_after_seconds
            answered[call.key] = Reply(409, {"error": "idempotency_key_in_use"}, retry_after=retry)
        elif row.claim_token == token and row.state == _PROCESSING:
            owned[call.key] = (row.id, token)
        elif (
            row.state == _PROCESSING
            and row.request_hash == call.request_hash
            and row.claimed_at < stale_before
            and _take_over(store, row, token, now)
        ):
            log_event(logger, logging.WARNING, "idempotency claim taken over", key=call.key)
            owned[call.key] = (row.id, token)
        else:
            answered[call.key] = _answer_existing(row, call.request_hash, settings)
    return owned, answered


def _take_over(store: Store, row: _StoredKey, token: str, now: float) -> bool:
    keys = store.tables.IdempotencyKey
    with store.db.atomic():
        changed = (
            keys.update(claim_token=token, claimed_at=now)
            .where(
                keys.id == row.id,
                keys.state == _PROCESSING,
                keys.claim_token == row.claim_token,
            )
            .execute()
        )
    return bool(changed)


def finish(store: Store, claim: tuple[int, str], reply: Reply) -> None:
    row_id, token = claim
    p = store.db.param
    sql = (
        f'UPDATE {_key_table(store)} SET "state" = {p}, "status_code" = {p}, '
        f'"response_body" = {p} WHERE "id" = {p} AND "claim_token" = {p} AND "state" = {p}'
    )
    params = [_DONE, reply.status, stored_json(reply.body), row_id, token, _PROCESSING]
    if not store.db.execute_sql(sql, params).rowcount:
        raise LostClaim


def release(store: Store, claims: Sequence[tuple[int, str]]) -> None:
    """Give up claims whose effect failed, so a retry can run it (best effort)."""
    keys = store.tables.IdempotencyKey
    try:
        with store.db.atomic():
            for row_id, token in claims:
                keys.delete().where(
                    keys.id == row_id, keys.claim_token == token, keys.state == _PROCESSING
                ).execute()
    except pw.DatabaseError:
        logger.exception("could not release idempotency claims; they expire with the lease")


def reread(store: Store, device_id: int, call: IdempotentCall, settings: Settings) -> Reply:
    row = _stored_keys(store, device_id, [call.key]).get(call.key)
    if row is None:
        retry = settings.in_use_retry_after_seconds
        return Reply(409, {"error": "idempotency_key_in_use"}, retry_after=retry)
    return _answer_existing(row, call.request_hash, settings)


def finish_all(store: Store, finished: Sequence[tuple[tuple[int, str], Reply]]) -> None:
    """`finish` for many claims, in multi-row UPDATEs (peewee would build one per claim)."""
    table = f'"{store.tables.IdempotencyKey._meta.table_name}"'
    param = store.db.param
    columns = ("id", "claim_token", "status_code", "response_body")
    size = store.rows_per_statement(len(columns))
    for start in range(0, len(finished), size):
        chunk = finished[start : start + size]
        sql = (
            f'UPDATE {table} SET "state" = {param}, "status_code" = v."status_code", '
            f'"response_body" = v."response_body" '
            f"FROM {store.values_table(columns, len(chunk))} AS v "
            f'WHERE {table}."id" = v."id" AND {table}."claim_token" = v."claim_token" '
            f'AND {table}."state" = {param}'
        )
        params: list[Any] = [_DONE]
        for (row_id, token), reply in chunk:
            params += [row_id, token, reply.status, stored_json(reply.body)]
        params.append(_PROCESSING)
        if store.db.execute_sql(sql, params).rowcount != len(chunk):
            raise LostClaim


def abandon_claims(store: Store, settings: Settings) -> int:
    """At startup: let a retry take over every claim made before now; return how many."""
    keys = store.tables.IdempotencyKey
    now = settings.clock()
    stale = now - settings.idempotency_lease_seconds - 1.0
    with store.db.atomic():
        return int(
            keys.update(claimed_at=stale)
            .where(keys.state == _PROCESSING, keys.claimed_at < now)
            .execute()
        )


def prune_expired(store: Store, settings: Settings) -> int:
    """Delete keys (and abandoned claims) older than the retention period; return how many."""
    keys = store.tables.IdempotencyKey
    cutoff = settings.clock() - settings.idempotency_retention_seconds
    with store.db.atomic():
        return int(keys.delete().where(keys.created_at < cutoff).execute())
