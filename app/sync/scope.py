"""Scoped sync on the device's network side (issue 16): the feed's departures, who the device
is, pins ("Keep offline") and the server search.

The store side (what stays, what goes, pin requests) is `app.store.scope`. `Finder` is what
the screens call: a search that needs the server, and pins that are durable on the device
first and sent at once when the server answers, else before the next pull.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from app.events import EventBus, OpChanges
from app.mutations import canonical_entity_id
from app.records import server_record_problem
from app.store.cache import apply_server_record
from app.store.db import WriteTransaction
from app.store.scope import (
    Identity,
    discard_left_scope,
    pending_pins,
    pin_refused,
    pin_sent,
    read_identity,
    request_pin,
    write_identity,
)
from app.store.store import Store
from app.sync.errors import (
    AuthError,
    MalformedReplyError,
    ReplyKind,
    ServerSaturatedError,
    SyncError,
    TransientError,
    classify_pin,
    read_error,
    saturated,
)
from app.sync.transport import Reply, ServerClient

__all__ = [
    "NEEDS_CONNECTION",
    "Finder",
    "NeedsConnection",
    "PinOutcome",
    "PinRefused",
    "ScopeSync",
    "SearchPage",
    "SearchRefused",
    "set_pin",
    "split_feed",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: What a search says without the server (the CLI and the search page).
NEEDS_CONNECTION = "search needs a connection to the server"

#: How long the device trusts who the server said it is before asking again (a pull with
#: departures asks at once: a new team is the usual reason).
IDENTITY_MAX_AGE_S = 600.0

PinOutcome = Literal["sent", "queued"]


class NeedsConnection(TransientError):
    """An online-only request (search) could not reach the server."""


class PinRefused(SyncError):
    """The server refused a pin for good (no such work order, not allowed)."""


class SearchRefused(SyncError):
    """The server refused the search's words or paging (400, 422)."""


class Executor(Protocol):
    async def run(self, fn: Callable[..., T], *args: Any) -> T: ...


# -- the feed --------------------------------------------------------------------------------


def split_feed(changes: list[Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """A feed page as (records inside the scope, ids that left it). When one id comes twice,
    its last entry counts. MalformedReplyError names an entry the device cannot use: the
    page and its token wait until the server is fixed, as for any unusable record."""
    last: dict[str, tuple[bool, dict[str, Any]]] = {}
    for entry in changes:
        if isinstance(entry, dict) and entry.get("out_of_scope") is True:
            try:
                entity_id = canonical_entity_id(str(entry.get("id")))
            except ValueError as exc:
                raise MalformedReplyError(f"changes feed: out-of-scope entry: {exc}") from None
            last.pop(entity_id, None)
            last[entity_id] = (True, entry)
            continue
        problem = server_record_problem(entry)
        if problem is None and not isinstance(entry.get("pinned", False), bool):
            problem = f"record {str(entry.get('id'))[:40]!r}: pinned: must be true or false"
        if problem is not None:
            raise MalformedReplyError(f"changes feed holds an unusable {problem}")
        last.pop(str(entry["id"]), None)
        last[str(entry["id"])] = (False, entry)
    records = [entry for gone, entry in last.values() if not gone]
    return records, [entity_id for entity_id, (gone, _) in last.items() if gone]


# -- before each pull ------------------------------------------------------------------------


class ScopeSync:
    """What the reconciler does for the scope around a pull: learn who the device is, and
    send the pins asked for while offline."""

    def __init__(
        self,
        store: Store,
        client: ServerClient,
        executor: Executor,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.client = client
        self.executor = executor
        self.monotonic = monotonic
        self._identity_at: float | None = None

    def identity_stale(self) -> None:
        """The scope may have changed (the feed said work orders left it): ask again."""
        self._identity_at = None

    async def refresh_identity(self) -> Identity | None:
        """Ask the server who this device is, when not asked lately. A server without
        ``/v1/me`` (older) or with an unusable answer leaves what the device knew."""
        now = self.monotonic()
        if self._identity_at is not None and now - self._identity_at < IDENTITY_MAX_AGE_S:
            return None
        reply = await self.client.me()
        if reply.status == 401:
            raise AuthError("the server refused this device's token: sign in again")
        if saturated(reply.status, reply.error):  # the pull waits, as the server asked
            raise ServerSaturatedError("who am I: server busy", retry_after=reply.retry_after)
        self._identity_at = now
        identity = Identity.from_json(reply.body) if reply.status == 200 else None
        if identity is None:
            log.info("the server did not say who this device is (%s)", reply.status)
            return None
        known = await self.executor.run(read_identity, self.store)
        if identity != known:
            await self.executor.run(write_identity, self.store, identity)
        return identity

    async def send_pins(self) -> list[str]:
        """Send every pin and unpin still waiting; returns the server's refusals in words.
        A network failure stops here (the rest wait); the pull meets it next."""
        refusals: list[str] = []
        for entity_id, pinned in await self.executor.run(pending_pins, self.store):
            reply = await self.client.set_pin(entity_id, pinned)
            try:
                await _settle_pin(self.store, self.executor, entity_id, pinned, reply)
            except PinRefused as exc:
                refusals.append(str(exc))
            except TransientError:
                break
        return refusals

    async def before_pull(self) -> None:
        await self.refresh_identity()
        for refusal in await self.send_pins():
            log.warning("pin refused: %s", refusal)


async def _settle_pin(
    store: Store, executor: Executor, entity_id: str, pinned: bool, reply: Reply
) -> None:
    """Record what the server answered to a pin: sent, kept for later, or refused."""
    verdict = classify_pin(reply.status, reply.error)
    if verdict.kind is ReplyKind.SUCCESS:
        await executor.run(pin_sent, store, entity_id, pinned)
    elif verdict.kind is ReplyKind.AUTH:
        raise AuthError(verdict.reason)
    elif verdict.kind is ReplyKind.TRANSIENT:
        raise TransientError(verdict.reason, retry_after=reply.retry_after)
    else:
        await executor.run(pin_refused, store, entity_id, pinned)
        word = "pin" if pinned else "unpin"
        raise PinRefused(f"the server refused to {word} {entity_id}: {verdict.reason}")


async def set_pin(
    store: Store, executor: Executor, client: ServerClient, entity_id: str, pinned: bool
) -> PinOutcome:
    """Pin or unpin: durable on the device first, then sent. ``queued`` when the server is
    out of reach (sent before the next pull); PinRefused when it refused; AuthError on 401
    (kept, sent after signing in). ValueError when ``entity_id`` is not a work-order id.

    A work order pinned from a search result is fetched at once, so it is available
    offline without waiting for the next pull."""
    entity_id = canonical_entity_id(entity_id)
    await executor.run(request_pin, store, entity_id, pinned)
    try:
        reply = await client.set_pin(entity_id, pinned)
        await _settle_pin(store, executor, entity_id, pinned, reply)
    except TransientError as exc:
        log.info("pin kept for the next sync: %s", exc)
        return "queued"
    if pinned and not await executor.run(store.cache.exists, entity_id):
        try:
            await _fetch(store, executor, client, entity_id)
        except TransientError as exc:
            log.info("pinned %s; it arrives with the next pull (%s)", entity_id, exc)
    return "sent"


async def _fetch(store: Store, executor: Executor, client: ServerClient, entity_id: str) -> None:
    reply = await client.record(entity_id)
    problem = read_error(reply.status, reply.error, reply.retry_after, "record", reply.raw_error)
    if problem is not None:
        raise problem
    record = None if reply.body is None else reply.body.get("record")
    if server_record_problem(record) is not None or not isinstance(record, dict):
        raise MalformedReplyError(f"record {entity_id}: unusable reply")
    await executor.run(_store_pinned, store, {**record, "pinned": True}, reply.etag)


def _store_pinned(store: Store, record: dict[str, Any], etag: str | None) -> None:
    with WriteTransaction(store.db, store.path) as conn:
        apply_server_record(conn, record, store.clock(), etag=etag)


# -- search ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchPage:
    """One page of server search results; each record says ``available_offline`` (held in
    this device's cache). ``next_cursor`` asks for the next page (None: the last)."""

    records: list[dict[str, Any]]
    next_cursor: str | None

    def to_json(self) -> dict[str, Any]:
        return {"records": self.records, "next_cursor": self.next_cursor}


async def search(
    store: Store,
    executor: Executor,
    client: ServerClient,
    query: str,
    *,
    limit: int = 50,
    cursor: str | None = None,
) -> SearchPage:
    """Search every work order this device may read (online only: NeedsConnection)."""
    try:
        reply = await client.search(query, limit, cursor)
    except TransientError as exc:
        raise NeedsConnection(f"{NEEDS_CONNECTION} ({exc})") from None
    if reply.status in (400, 422):
        detail = (reply.body or {}).get("detail") or reply.error or reply.status
        raise SearchRefused(f"the server refused the search: {detail}")
    problem = read_error(reply.status, reply.error, reply.retry_after, "search", reply.raw_error)
    if problem is not None:
        raise problem
    body = reply.body or {}
    records = body.get("records")
    next_cursor = body.get("next_cursor")
    if not isinstance(records, list) or not (next_cursor is None or isinstance(next_cursor, str)):
        raise MalformedReplyError("search reply lacks records or next_cursor")
    for record in records:
        found = server_record_problem(record)
        if found is not None:
            raise MalformedReplyError(f"search reply holds an unusable {found}")
    held = set(await executor.run(store.cache.existing, [str(r["id"]) for r in records]))
    shown = [{**record, "available_offline": str(record["id"]) in held} for record in records]
    return SearchPage(shown, next_cursor)


class Finder:
    """Finding other work and keeping it offline: the core calls the screens await.

    Each pin publishes `OpChanges` for its work order (its "Pinned" mark changed)."""

    def __init__(
        self, store: Store, executor: Executor, client: ServerClient, events: EventBus
    ) -> None:
        self.store = store
        self.executor = executor
        self.client = client
        self.events = events

    async def search(self, query: str, limit: int = 50, cursor: str | None = None) -> SearchPage:
        return await search(
            self.store, self.executor, self.client, query, limit=limit, cursor=cursor
        )

    async def pin(self, entity_id: str) -> PinOutcome:
        return await self._set(entity_id, True)

    async def unpin(self, entity_id: str) -> PinOutcome:
        return await self._set(entity_id, False)

    async def discard_edits(self, entity_id: str) -> list[dict[str, Any]]:
        """Give up every unsent edit of a work order that left the scope; it leaves the
        device with them (`app.store.scope.discard_left_scope`)."""
        try:
            return await self.executor.run(discard_left_scope, self.store, entity_id)
        finally:
            ids = frozenset({entity_id})
            self.events.publish(OpChanges(ids, queue=True, conflicts=True))

    async def identity(self) -> Identity | None:
        """Who the server last said this device is (read from the store)."""
        return await self.executor.run(read_identity, self.store)

    async def _set(self, entity_id: str, pinned: bool) -> PinOutcome:
        entity_id = canonical_entity_id(entity_id)
        try:
            return await set_pin(self.store, self.executor, self.client, entity_id, pinned)
        finally:
            self.events.publish(OpChanges(frozenset({entity_id})))
