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
one write transaction, then marks all rows `done` in multi-row UPDATEs with the same
claim-token condition. If any row does not match (a claim taken over) or any statement fails,
that transaction is rolled back and the calls run one by one as above, in the next one: the
effects and their `done` rows still commit together or not at all.

The claim rows themselves (claiming, taking over, finishing, releasing, abandoning and pruning
them) live in `server/db/claims.py`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from server.db.claims import (
    IdempotentCall,
    LostClaim,
    Reply,
    abandon_claims,
    claim_keys,
    finish,
    finish_all,
    prune_expired,
    release,
    reread,
)
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


def request_hash(kind: str, payload: Any, *, plain: bool = False) -> str:
    """A stable hash of what a request asks for (key order and whitespace do not matter).

    The hashed text is the standard library's `json.dumps([kind, payload], sort_keys=True,
    separators=(",", ":"))`, as it always was (stored hashes must still match a retry after an
    upgrade). With `plain`, the caller vouches that `payload` holds only text, integers,
    booleans and null (a validated mutation does): orjson writes that very text then, several
    times faster, unless it holds a character past ASCII or DEL (which the standard library
    escapes and orjson does not) or an integer past 64 bits."""
    if plain:
        with contextlib.suppress(TypeError):
            encoded = orjson.dumps([kind, payload], option=orjson.OPT_SORT_KEYS)
            if encoded.isascii() and b"\x7f" not in encoded:
                return hashlib.sha256(encoded).hexdigest()
    canonical = json.dumps([kind, payload], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


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
    owned, answered = claim_keys(store, device_id, unique, settings)
    pending = [position for position in first.values() if calls[position].key in owned]
    failed: list[tuple[int, str]] = []
    lost: list[IdempotentCall] = []
    if len(pending) == 1 and batch_effect is None:
        _run_alone(store, calls[pending[0]], owned, answered, failed, lost)
    elif owned:
        at_once = None
        if batch_effect is not None:
            at_once = _apply_at_once(store, calls, pending, owned, batch_effect)
        if at_once is not None:
            answered.update(at_once)
        else:
            try:
                with store.write_transaction() as sequence:
                    for position in pending:
                        call = calls[position]
                        claim = owned[call.key]
                        mark = sequence.last
                        try:
                            with store.db.atomic():
                                reply = call.effect(sequence)
                                finish(store, claim, reply)
                            answered[call.key] = reply
                        except LostClaim:
                            sequence.forget_fresh(mark)
                            lost.append(call)
                        except Exception:
                            sequence.forget_fresh(mark)
                            log_event(logger, logging.ERROR, "effect failed", key=call.key)
                            logger.exception("effect failed")
                            failed.append(claim)
                            answered[call.key] = Reply(500, {"error": "internal_error"})
            except Exception:
                release(store, list(owned.values()))
                raise
    if failed:
        release(store, failed)
    for call in lost:
        answered[call.key] = reread(store, device_id, call, settings)
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
                finish(store, claim, reply)
            except LostClaim:
                raise
            except Exception as error:
                raise _EffectFailed from error
    except LostClaim:
        lost.append(call)
    except _EffectFailed as error:
        log_event(logger, logging.ERROR, "effect failed", key=call.key)
        logger.error("effect failed", exc_info=error.__cause__)
        failed.append(claim)
        answered[call.key] = Reply(500, {"error": "internal_error"})
    except Exception:
        release(store, [claim])
        raise
    else:
        answered[call.key] = reply


def _apply_at_once(
    store: Store,
    calls: Sequence[IdempotentCall],
    positions: Sequence[int],
    owned: dict[str, tuple[int, str]],
    batch_effect: BatchEffect,
) -> dict[str, Reply] | None:
    """The replies of `batch_effect` with the responses stored, committed in a write
    transaction of their own, or None if it was rolled back.

    A transaction, not a savepoint in the one-by-one path's: on PostgreSQL a savepoint and
    its release are two more round trips for every batch, to spare a rare one a second
    `BEGIN`."""
    try:
        with store.write_transaction() as sequence:
            replies = batch_effect(sequence, positions)
            keys = [calls[position].key for position in positions]
            finish_all(
                store, [(owned[key], reply) for key, reply in zip(keys, replies, strict=True)]
            )
    except Exception as error:
        # Rare: a claim taken over meanwhile, a create of an id that exists, or an item the
        # database refused. All of it rolled back, its change numbers too; the one-by-one
        # path sorts out who gets what.
        log_event(
            logger, logging.WARNING, "batch effect rolled back; one by one", reason=repr(error)
        )
        return None
    return dict(zip(keys, replies, strict=True))


def _repeat_in_batch(reply: Reply, original: IdempotentCall, repeat: IdempotentCall) -> Reply:
    if original.request_hash != repeat.request_hash:
        return Reply(422, {"error": "idempotency_key_reused"})
    if reply.status == 500 or reply.retry_after is not None:
        return reply
    return Reply(reply.status, reply.body, replayed=True)
