"""Bringing the cache back in line with the server after a reconnect, without wiping it.

Order (the worker flushes pending mutations first): pull ``/v1/changes`` since the stored
sync token page by page, saving the token in the same transaction as the page it follows;
apply server records without overwriting records with pending local edits; report exactly the
keys that changed (targeted invalidation); then revalidate priority records (open in the UI,
assigned to this device) with ``If-None-Match``. Escalated conflicts whose review ended are
closed with the server's record.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.attachments.feed import apply_feed_attachments, feed_attachment_problem
from app.attachments.files import AttachmentFiles
from app.attachments.retention import forget_departed
from app.executor import StoreExecutor
from app.records import server_record_problem
from app.store.cache import apply_server_record, apply_server_records
from app.store.db import WriteTransaction, connection, in_batches
from app.store.scope import (
    apply_departures,
    keep_requested_pins,
    remove_departed,
    returned_to_scope,
)
from app.store.settings import read_setting, write_setting
from app.store.store import Store
from app.sync.conflicts import Conflicts
from app.sync.device_report import device_report, encode_report
from app.sync.errors import MalformedReplyError, read_error
from app.sync.scope import ScopeSync, split_feed
from app.sync.transport import Reply, ServerClient

__all__ = ["SYNC_TOKEN_KEY", "ReconcileReport", "Reconciler", "read_setting", "write_setting"]

SYNC_TOKEN_KEY = "changes_token"


@dataclass
class ReconcileReport:
    pages: int = 0
    changes: int = 0
    changed_ids: set[str] = field(default_factory=set)
    kept_local: int = 0
    #: Records the device did not hold at that version before (not the echo of its own
    #: acknowledged edits): what "Sync now" calls received.
    received: int = 0
    revalidated: int = 0
    reviews_closed: int = 0
    #: Work orders that left the scope (issue 16): removed, or kept for their unsent edits.
    left_scope: int = 0
    kept_unsent: int = 0
    duration_s: float = 0.0


def _check(reply: Reply, what: str) -> dict[str, Any]:
    problem = read_error(reply.status, reply.error, reply.retry_after, what, reply.raw_error)
    if problem is None and reply.body is None:
        problem = MalformedReplyError(f"{what}: unexpected reply {reply.status} {reply.raw_error}")
    if problem is not None:
        raise problem
    assert reply.body is not None
    return reply.body


@dataclass(frozen=True)
class PageApplied:
    """What one page did: ids that took the server's values, how many records were kept for
    local edits, how many were news (a version the device did not hold), the work orders
    that left the scope (removed, or kept for their unsent edits), and those whose
    attachments the page added or removed (a colleague's photo leaves the version alone)."""

    changed: set[str]
    kept_local: int
    news: int
    removed: set[str] = field(default_factory=set)
    kept_unsent: set[str] = field(default_factory=set)
    attachments: set[str] = field(default_factory=set)


def apply_page(
    store: Store,
    records: list[dict[str, Any]],
    token: str,
    departures: Sequence[str] = (),
    attachments: Sequence[dict[str, Any]] = (),
) -> PageApplied:
    """Apply one page of server changes and advance the token, atomically: records inside
    the scope, the ids that left it (`app.store.scope.apply_departures`), and the page's
    attachment changes (`app.attachments.feed`)."""
    now = store.clock()
    ids = [str(record["id"]) for record in records]
    with WriteTransaction(store.db, store.path) as conn:
        news = _news(conn, records)
        changed = apply_server_records(conn, records, now)
        with_files = apply_feed_attachments(conn, records, attachments, now)
        returned_to_scope(conn, ids)
        keep_requested_pins(conn, ids)
        removed, kept = apply_departures(conn, departures, now)
        removed |= remove_departed(conn)
        with_files = _held(conn, with_files)
        write_setting(store, SYNC_TOKEN_KEY, token)
    return PageApplied(changed, len(set(ids) - changed), news, removed, kept, with_files)


def _held(conn: Any, entity_ids: set[str]) -> set[str]:
    """Which of these work orders the cache holds (a screen shows only those)."""
    if not entity_ids:
        return set()
    rows = conn.execute(
        "SELECT id FROM work_orders WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(sorted(entity_ids)),),
    )
    return {row[0] for row in rows}


def _news(conn: Any, records: list[dict[str, Any]]) -> int:
    """Records of a page newer than the server version the cache holds for them."""
    held: dict[str, int] = {}
    ids = [str(record["id"]) for record in records]
    for chunk, marks in in_batches(ids):
        held.update(
            conn.execute(
                f"SELECT id, server_version FROM work_orders WHERE id IN ({marks}) "
                "AND server_version IS NOT NULL",
                chunk,
            ).fetchall()
        )
    return sum(1 for r in records if int(r["version"]) > held.get(str(r["id"]), 0))


def _attachments_of(body: dict[str, Any], records: list[dict[str, Any]]) -> list[Any]:
    """The page's attachment changes, each checked like the records they belong to."""
    files = body.get("attachments", [])
    lists = [files, *(record.get("attachments", []) for record in records)]
    if not all(isinstance(items, list) for items in lists):
        raise MalformedReplyError("changes feed holds attachments that are not a list")
    for items in lists:
        for item in items:
            problem = feed_attachment_problem(item)
            if problem is not None:
                raise MalformedReplyError(f"changes feed holds an unusable {problem}")
    return list(files)


def _record_of(body: dict[str, Any] | None) -> Any:
    """`GET /v1/records/{id}` answers ``{"record": {...}}``."""
    return None if body is None else body.get("record")


def _usable_record(reply: Reply, what: str) -> dict[str, Any]:
    """The record of a 200 reply, or MalformedReplyError saying what is wrong with it."""
    record = _record_of(reply.body)
    problem = server_record_problem(record)
    if problem is not None:
        raise MalformedReplyError(f"{what}: unusable {problem}")
    assert isinstance(record, dict)
    return record


class Reconciler:
    def __init__(
        self,
        store: Store,
        client: ServerClient,
        executor: StoreExecutor,
        *,
        page_size: int = 500,
    ) -> None:
        self.store = store
        self.client = client
        self.executor = executor
        self.page_size = page_size
        self.conflicts = Conflicts(store)
        self.scope = ScopeSync(store, client, executor)
        self.files = AttachmentFiles(store.data_dir)

    async def pull(
        self, report: ReconcileReport, on_page: Callable[[int], None] | None = None
    ) -> None:
        """Pull every page; ``on_page`` hears the count of changes received so far."""
        token = await self.executor.run(read_setting, self.store, SYNC_TOKEN_KEY)
        # The office hears how this device stands with the first page: no request of its own.
        status: str | None = encode_report(await self.executor.run(device_report, self.store))
        while True:
            reply = await self.client.changes(token, self.page_size, status)
            status = None
            body = _check(reply, "changes feed")
            changes = body.get("changes")
            next_token = body.get("next")
            if not isinstance(changes, list) or next_token is None:
                raise MalformedReplyError("changes feed reply lacks changes or next")
            # An unusable entry is not skipped: the page (and the token) wait until the
            # server is fixed.
            records, departures = split_feed(changes)
            files = _attachments_of(body, records)
            page = await self.executor.run(
                apply_page, self.store, records, str(next_token), departures, files
            )
            report.pages += 1
            report.changes += len(changes)
            report.changed_ids |= page.changed | page.removed | page.kept_unsent
            report.changed_ids |= page.attachments
            report.kept_local += page.kept_local
            report.received += page.news
            report.left_scope += len(departures)
            report.kept_unsent += len(page.kept_unsent)
            if departures:
                self.scope.identity_stale()  # a new team, say: the list filters follow it
            if on_page is not None:
                on_page(report.changes)
            token = str(next_token)
            if not body.get("has_more"):
                break
        # Work orders gone from the device (this pull, or an ack or upload since) take their
        # attachments' rows, thumbnails and kept files with them.
        await self.executor.run(forget_departed, self.store, self.files)

    async def revalidate(
        self,
        entity_ids: Iterable[str],
        report: ReconcileReport,
        *,
        stale_after_s: float = 0.0,
    ) -> None:
        """Stale-while-revalidate: ask for each record with its ETag; 304 only touches it.
        Records synced less than ``stale_after_s`` ago are fresh enough and skipped."""
        for entity_id in entity_ids:
            row = await self.executor.run(self.store.cache.get, entity_id)
            if row is None or row["server_version"] is None:
                continue
            synced = row["last_synced_at"]
            if synced is not None and self.store.clock() - synced < stale_after_s:
                continue
            reply = await self.client.record(entity_id, row["etag"])
            if reply.status == 304:
                await self.executor.run(self._touch, entity_id)
            elif reply.status == 200:
                record = _usable_record(reply, "record")
                await self.executor.run(self._apply_one, record, reply.etag)
                report.changed_ids.add(entity_id)
                report.received += 1
            else:
                _check(reply, "record") if reply.status != 404 else None
            report.revalidated += 1

    def _touch(self, entity_id: str) -> None:
        with self.store.db.atomic():
            connection(self.store.db).execute(
                "UPDATE work_orders SET last_synced_at = ? WHERE id = ?",
                (self.store.clock(), entity_id),
            )

    def _apply_one(self, record: dict[str, Any], etag: str | None) -> None:
        with self.store.db.atomic():
            apply_server_record(connection(self.store.db), record, self.store.clock(), etag=etag)

    async def close_reviews(self, report: ReconcileReport) -> None:
        """Escalated conflicts: when an admin resolved or dismissed one, take the result."""
        for job_id, entity_id, review_id in await self.executor.run(self.conflicts.escalated):
            body = _check(await self.client.conflict(review_id), "review")
            review = body.get("conflict")
            if not isinstance(review, dict) or review.get("status") not in (
                "resolved",
                "dismissed",
            ):
                continue
            record_reply = await self.client.record(entity_id)
            _check(record_reply, "record")
            record = _usable_record(record_reply, "record")
            await self.executor.run(
                self.conflicts.close_reviewed, job_id, str(review["status"]), record
            )
            report.changed_ids.add(entity_id)
            report.reviews_closed += 1
            report.received += 1

    async def run(
        self, priority_ids: Iterable[str] = (), on_page: Callable[[int], None] | None = None
    ) -> ReconcileReport:
        started = time.monotonic()
        report = ReconcileReport()
        await self.scope.before_pull()
        await self.pull(report, on_page)
        await self.close_reviews(report)
        await self.revalidate(priority_ids, report)
        report.duration_s = time.monotonic() - started
        return report
