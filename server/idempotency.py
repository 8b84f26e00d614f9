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

A claim whose owner crashed stays `processing` until the lease runs out, then a retry takes it
over. Keys are retained `idempotency_retention_seconds` (30 days by default) and pruned after:
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

import peewee as pw

from server.database import ChangeSequence, Store
from server.logs import log_event
from server.models import IdempotencyKey
from server.settings import Settings

__all__ = ["IdempotentCall", "Reply", "execute_idempotent", "prune_expired", "request_hash"]

logger = logging.getLogger(__name__)

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


def request_hash(kind: str, payload: Any) -> str:
    """A stable hash of what a request asks for (key order and whitespace do not matter)."""
    canonical = json.dumps([kind, payload], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class _LostClaim(Exception):
    """Our claim was taken over while the effect ran; the effect must roll back."""


def _answer_existing(row: IdempotencyKey, request_hash: str, settings: Settings) -> Reply:
    if row.request_hash != request_hash:
        return Reply(422, {"error": "idempotency_key_reused"})
    if row.state == _DONE and row.status_code is not None:
        return Reply(row.status_code, json.loads(row.response_body or "{}"), replayed=True)
    retry = settings.in_use_retry_after_seconds
    return Reply(409, {"error": "idempotency_key_in_use"}, retry_after=retry)


def _claim(
    store: Store, device_id: int, calls: Sequence[IdempotentCall], settings: Settings
) -> tuple[dict[str, tuple[int, str]], dict[str, Reply]]:
    """Phase 1: returns (owned key -> (row id, claim token), answered key -> reply)."""
    keys = store.tables.IdempotencyKey
    now = settings.clock()
    token = secrets.token_hex(16)
    owned: dict[str, tuple[int, str]] = {}
    answered: dict[str, Reply] = {}
    with store.db.atomic():
        rows = [
            {
                "device_id": device_id,
                "key": call.key,
                "request_hash": call.request_hash,
                "state": _PROCESSING,
                "claim_token": token,
                "claimed_at": now,
                "created_at": now,
            }
            for call in calls
        ]
        keys.insert_many(rows).on_conflict_ignore().execute()
        found = {
            row.key: row
            for row in keys.select().where(
                keys.device_id == device_id, keys.key.in_([call.key for call in calls])
            )
        }
    stale_before = now - settings.idempotency_lease_seconds
    for call in calls:
        row = found[call.key]
        if row.claim_token == token and row.state == _PROCESSING:
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


def _take_over(store: Store, row: IdempotencyKey, token: str, now: float) -> bool:
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
    keys = store.tables.IdempotencyKey
    row_id, token = claim
    changed = (
        keys.update(state=_DONE, status_code=reply.status, response_body=json.dumps(reply.body))
        .where(keys.id == row_id, keys.claim_token == token, keys.state == _PROCESSING)
        .execute()
    )
    if not changed:
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
    keys = store.tables.IdempotencyKey
    row = keys.get_or_none(keys.device_id == device_id, keys.key == call.key)
    if row is None:
        retry = settings.in_use_retry_after_seconds
        return Reply(409, {"error": "idempotency_key_in_use"}, retry_after=retry)
    return _answer_existing(row, call.request_hash, settings)


def execute_idempotent(
    store: Store, device_id: int, calls: Sequence[IdempotentCall], settings: Settings
) -> list[Reply]:
    """Run each call's effect at most once per (device, key); one reply per call, in order.

    A key repeated within `calls` is answered like a retry of its first occurrence.
    """
    first: dict[str, IdempotentCall] = {}
    for call in calls:
        first.setdefault(call.key, call)
    unique = list(first.values())
    owned, answered = _claim(store, device_id, unique, settings)
    failed: list[tuple[int, str]] = []
    lost: list[IdempotentCall] = []
    if owned:
        try:
            with store.write_transaction() as sequence:
                for call in unique:
                    claim = owned.get(call.key)
                    if claim is None:
                        continue
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
    seen: set[str] = set()
    for call in calls:
        reply = answered[call.key]
        if call.key in seen:
            reply = _repeat_in_batch(reply, first[call.key], call)
        seen.add(call.key)
        replies.append(reply)
    return replies


def _repeat_in_batch(reply: Reply, original: IdempotentCall, repeat: IdempotentCall) -> Reply:
    if original.request_hash != repeat.request_hash:
        return Reply(422, {"error": "idempotency_key_reused"})
    if reply.status == 500 or reply.retry_after is not None:
        return reply
    return Reply(reply.status, reply.body, replayed=True)


def prune_expired(store: Store, settings: Settings) -> int:
    """Delete keys (and abandoned claims) older than the retention period; return how many."""
    keys = store.tables.IdempotencyKey
    cutoff = settings.clock() - settings.idempotency_retention_seconds
    with store.db.atomic():
        return int(keys.delete().where(keys.created_at < cutoff).execute())
