"""Turning repeated requests into one effect: claim the key, apply, store the response.

A request with `Idempotency-Key` goes through two short transactions:

1. **Claim.** `INSERT … ON CONFLICT DO NOTHING` a `processing` row for (device, key) carrying
   a fresh claim token. The unique index decides the race: exactly one concurrent request
   inserts; the others read the existing row and answer from it (422 if the body hash differs,
   the stored response if it is `done`, 409 `idempotency_key_in_use` while `processing`).
2. **Effect.** Inside the write transaction the effect runs and the row becomes `done` with the
   response, `WHERE claim_token = ours`. If a claim was taken over meanwhile (ours looked
   abandoned after the lease), the update matches nothing and the effect is rolled back, so
   even then there is one effect.

A batch claims all its keys in one transaction (in key order, so overlapping batches on
PostgreSQL cannot deadlock) and, given a `BatchEffect`, runs every claimed effect at once in
one savepoint of one write transaction, then marks all rows `done` in multi-row UPDATEs with
the same claim-token condition. If any row does not match (a claim taken over) or any statement
fails, the savepoint is rolled back and the calls run one by one as above: the effects and
their `done` rows still commit together or not at all.

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

import hashlib
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

__all__ = [
    "BatchEffect",
    "abandon_claims",
    "IdempotentCall",
    "Reply",
    "execute_idempotent",
    "prune_expired",
    "request_hash",
]

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


def request_hash(kind: str, payload: Any) -> str:
    """A stable hash of what a request asks for (key order and whitespace do not matter)."""
    canonical = json.dumps([kind, payload], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class _LostClaim(Exception):
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
) -> None:
    """`processing` rows for keys not stored yet; the unique (device, key) index decides races."""
    width = _CLAIM_COLUMNS.count(",") + 1
    size = store.rows_per_statement(width)
    # In key order: on PostgreSQL an insert waits for a concurrent uncommitted insert of the
    # same key, so two overlapping batches claiming in their own orders could deadlock.
    ordered = sorted(calls, key=lambda call: call.key)
    for start in range(0, len(ordered), size):
        chunk = ordered[start : start + size]
        sql = (
            f"INSERT INTO {_key_table(store)} ({_CLAIM_COLUMNS}) "
            f"VALUES {store.values_list(len(chunk), width)} ON CONFLICT DO NOTHING"
        )
        params: list[Any] = []
        for call in chunk:
            params += [device_id, call.key, call.request_hash, _PROCESSING, token, now, now]
        store.db.execute_sql(sql, params)


def _stored_keys(store: Store, device_id: int, keys: Sequence[str]) -> dict[str, _StoredKey]:
    found: dict[str, _StoredKey] = {}
    size = store.rows_per_statement(1) - 1  # one parameter is the device
    for start in range(0, len(keys), size):
        chunk = keys[start : start + size]
        marks = ", ".join([store.db.param] * len(chunk))
        sql = (
            f"SELECT {_STORED_COLUMNS} FROM {_key_table(store)} "
            f'WHERE "device_id" = {store.db.param} AND "key" IN ({marks})'
        )
        for key, *values in store.db.execute_sql(sql, [device_id, *chunk]).fetchall():
            found[key] = _StoredKey(*values)
    return found


def _claim(
    store: Store, device_id: int, calls: Sequence[IdempotentCall], settings: Settings
) -> tuple[dict[str, tuple[int, str]], dict[str, Reply]]:
    """Phase 1: returns (owned key -> (row id, claim token), answered key -> reply)."""
    now = settings.clock()
    token = secrets.token_hex(16)
    owned: dict[str, tuple[int, str]] = {}
    answered: dict[str, Reply] = {}
    with store.db.atomic():
        _insert_claims(store, device_id, calls, token, now)
        found = _stored_keys(store, device_id, [call.key for call in calls])
    stale_before = now - settings.idempotency_lease_seconds
    for call in calls:
        row = found.get(call.key)
        if row is None:
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


def _finish(store: Store, claim: tuple[int, str], reply: Reply) -> None:
    row_id, token = claim
    p = store.db.param
    sql = (
        f'UPDATE {_key_table(store)} SET "state" = {p}, "status_code" = {p}, '
        f'"response_body" = {p} WHERE "id" = {p} AND "claim_token" = {p} AND "state" = {p}'
    )
    params = [_DONE, reply.status, stored_json(reply.body), row_id, token, _PROCESSING]
    if not store.db.execute_sql(sql, params).rowcount:
        raise _LostClaim


def _release(store: Store, claims: Sequence[tuple[int, str]]) -> None:
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


def _reread(store: Store, device_id: int, call: IdempotentCall, settings: Settings) -> Reply:
    row = _stored_keys(store, device_id, [call.key]).get(call.key)
    if row is None:
        retry = settings.in_use_retry_after_seconds
        return Reply(409, {"error": "idempotency_key_in_use"}, retry_after=retry)
    return _answer_existing(row, call.request_hash, settings)


#: Runs the effects of the calls at the given positions in one go, in order, inside the write
#: transaction; returns their replies. It must answer exactly as the calls' own effects would
#: one after another, and raise if it cannot: its writes are then rolled back and the effects
#: run one by one.
BatchEffect = Callable[[ChangeSequence, Sequence[int]], list[Reply]]


def execute_idempotent(
    store: Store,
    device_id: int,
    calls: Sequence[IdempotentCall],
    settings: Settings,
    *,
    batch_effect: BatchEffect | None = None,
) -> list[Reply]:
    """Run each call's effect at most once per (device, key); one reply per call, in order.

    A key repeated within `calls` is answered like a retry of its first occurrence. With
    `batch_effect`, the calls whose keys were claimed run through it and their responses are
    stored with one statement, instead of a savepoint, an effect and an update per call.
    """
    first: dict[str, int] = {}
    for position, call in enumerate(calls):
        first.setdefault(call.key, position)
    unique = [calls[position] for position in first.values()]
    owned, answered = _claim(store, device_id, unique, settings)
    pending = [position for position in first.values() if calls[position].key in owned]
    failed: list[tuple[int, str]] = []
    lost: list[IdempotentCall] = []
    if len(pending) == 1 and batch_effect is None:
        _run_alone(store, calls[pending[0]], owned, answered, failed, lost)
    elif owned:
        try:
            with store.write_transaction() as sequence:
                at_once = None
                if batch_effect is not None:
                    at_once = _apply_at_once(store, calls, pending, owned, batch_effect, sequence)
                if at_once is not None:
                    answered.update(at_once)
                else:
                    for position in pending:
                        call = calls[position]
                        claim = owned[call.key]
                        try:
                            with store.db.atomic():
                                reply = call.effect(sequence)
                                _finish(store, claim, reply)
                            answered[call.key] = reply
                        except _LostClaim:
                            lost.append(call)
                        except Exception:
                            log_event(logger, logging.ERROR, "effect failed", key=call.key)
                            logger.exception("effect failed")
                            failed.append(claim)
                            answered[call.key] = Reply(500, {"error": "internal_error"})
        except Exception:
            _release(store, list(owned.values()))
            raise
    if failed:
        _release(store, failed)
    for call in lost:
        answered[call.key] = _reread(store, device_id, call, settings)
    replies: list[Reply] = []
    for position, call in enumerate(calls):
        reply = answered[call.key]
        original = first[call.key]
        if position != original:
            reply = _repeat_in_batch(reply, calls[original], call)
        replies.append(reply)
    return replies


class _EffectFailed(Exception):
    """The effect itself raised (not the transaction around it)."""


def _run_alone(
    store: Store,
    call: IdempotentCall,
    owned: dict[str, tuple[int, str]],
    answered: dict[str, Reply],
    failed: list[tuple[int, str]],
    lost: list[IdempotentCall],
) -> None:
    """One call in a write transaction of its own: no savepoint, since a failure rolls back
    the whole transaction, which held nothing else; answers as the one-by-one path does."""
    claim = owned[call.key]
    try:
        with store.write_transaction() as sequence:
            try:
                reply = call.effect(sequence)
                _finish(store, claim, reply)
            except _LostClaim:
                raise
            except Exception as error:
                raise _EffectFailed from error
    except _LostClaim:
        lost.append(call)
    except _EffectFailed as error:
        log_event(logger, logging.ERROR, "effect failed", key=call.key)
        logger.error("effect failed", exc_info=error.__cause__)
        failed.append(claim)
        answered[call.key] = Reply(500, {"error": "internal_error"})
    except Exception:
        _release(store, [claim])
        raise
    else:
        answered[call.key] = reply


def _apply_at_once(
    store: Store,
    calls: Sequence[IdempotentCall],
    positions: Sequence[int],
    owned: dict[str, tuple[int, str]],
    batch_effect: BatchEffect,
    sequence: ChangeSequence,
) -> dict[str, Reply] | None:
    """The replies of `batch_effect` with the responses stored, or None if it was rolled back."""
    start = sequence.last
    try:
        with store.db.atomic():
            replies = batch_effect(sequence, positions)
            keys = [calls[position].key for position in positions]
            _finish_all(
                store, [(owned[key], reply) for key, reply in zip(keys, replies, strict=True)]
            )
    except Exception as error:
        # Rare: a claim taken over meanwhile, or an item the database refused. The savepoint
        # is gone, so are the numbers it used; the one-by-one path sorts out who gets what.
        sequence.rewind(start)
        log_event(
            logger, logging.WARNING, "batch effect rolled back; one by one", reason=repr(error)
        )
        return None
    return dict(zip(keys, replies, strict=True))


def _finish_all(store: Store, finished: Sequence[tuple[tuple[int, str], Reply]]) -> None:
    """`_finish` for many claims, in multi-row UPDATEs (peewee would build one per claim)."""
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
            raise _LostClaim


def _repeat_in_batch(reply: Reply, original: IdempotentCall, repeat: IdempotentCall) -> Reply:
    if original.request_hash != repeat.request_hash:
        return Reply(422, {"error": "idempotency_key_reused"})
    if reply.status == 500 or reply.retry_after is not None:
        return reply
    return Reply(reply.status, reply.body, replayed=True)


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
