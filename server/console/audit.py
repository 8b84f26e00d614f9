"""Audit (`/console/audit`): who did what and when, from the console and from the devices.

Four sources, merged newest first: the console's own log (office users' changes), the review
queue's log (conflicts raised by devices, decided by admins), the work-order changes devices
made (the change log, server/records/history.py) and the attachments devices added and
removed. Filtered by who, what and a time range; exported as CSV.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from dataclasses import dataclass
from typing import Annotated, Any, cast

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from server.console.render import iso_at, page
from server.console.sessions import ConsoleState, SignedIn, console_state

__all__ = ["AuditEntry", "audit_entries", "router"]

router = APIRouter()
_SHOWN = 500
_EXPORTED = 100_000


@dataclass(frozen=True)
class AuditEntry:
    at: str
    who: str
    source: str
    action: str
    subject: str
    detail: str


def _parse_day(text: str, *, end: bool) -> str:
    """`YYYY-MM-DD` as an ISO time (the start of the day, or its end); "" when not given."""
    if not text:
        return ""
    day = dt.date.fromisoformat(text)
    return f"{day.isoformat()}T23:59:59Z" if end else f"{day.isoformat()}T00:00:00Z"


def audit_entries(
    state: ConsoleState, *, who: str = "", action: str = "", since: str = "", until: str = "",
    limit: int = _SHOWN,
) -> list[AuditEntry]:  # fmt: skip
    """Entries newest first; `who`/`action` match a part, `since`/`until` are ISO times."""
    found: list[AuditEntry] = []
    console = state.tables.Audit
    query = console.select().order_by(console.at.desc()).limit(limit)
    if who:
        query = query.where(console.actor.contains(who))
    if action:
        query = query.where(console.action.contains(action))
    found += [
        AuditEntry(iso_at(row.at), row.actor, "console", row.action, row.subject, row.detail)
        for row in query
    ]
    reviews, conflicts = state.store.tables.ConflictAudit, state.store.tables.Conflict
    decisions = (
        reviews.select(reviews, conflicts.entity_id)
        .join(conflicts, on=(conflicts.id == reviews.conflict_id))
        .order_by(reviews.at.desc())
        .limit(limit)
    )
    if who:
        decisions = decisions.where(reviews.actor.contains(who))
    if action:
        decisions = decisions.where(("conflict." + reviews.action).contains(action))
    found += [
        AuditEntry(
            row["at"],
            row["actor"],
            "review queue",
            f"conflict.{row['action']}",
            row["entity_id"],
            row["chosen"],
        )  # fmt: skip
        for row in cast(list[dict[str, Any]], decisions.dicts())
    ]
    found += _device_edits(state, who=who, action=action, since=since, until=until, limit=limit)
    files = state.store.tables.Attachment
    for column, who_column, verb in (
        (files.created_at, files.created_by, "attachment.add"),
        (files.deleted_at, files.deleted_by, "attachment.remove"),
    ):
        if action and action not in verb:
            continue
        added = files.select().where(column.is_null(False)).order_by(column.desc()).limit(limit)
        if who:
            added = added.where(who_column.contains(who))
        found += [
            AuditEntry(getattr(row, column.name), getattr(row, who_column.name), "device", verb,
                       row.entity_id, json.dumps({"file": row.filename, "size": row.size}))
            for row in added
        ]  # fmt: skip
    found = [e for e in found if (not since or e.at >= since) and (not until or e.at <= until)]
    return sorted(found, key=lambda entry: entry.at, reverse=True)[:limit]


def _device_edits(
    state: ConsoleState, *, who: str, action: str, since: str, until: str, limit: int
) -> list[AuditEntry]:
    """Work-order changes devices made, from the change log (the console's own are above)."""
    log = state.store.tables.WorkOrderChange
    query = (
        log.select().where(log.source == "device").order_by(log.at.desc(), log.id.desc())
        .limit(limit)
    )  # fmt: skip
    if who:
        query = query.where(log.actor.contains(who) | log.device.contains(who))
    if action:
        query = query.where(("work_order." + log.kind).contains(action))
    if since:
        query = query.where(log.at >= since)
    if until:
        query = query.where(log.at <= until)
    return [
        AuditEntry(row.at, f"{row.actor} ({row.device})" if row.device else row.actor, "device",
                   f"work_order.{row.kind}", row.entity_id, _spaced(row.fields))
        for row in query
    ]  # fmt: skip


def _spaced(fields: str) -> str:
    """A change-log entry's fields as the page has always shown them (the log stores compact
    JSON since it is written with orjson; older entries are spaced already)."""
    return json.dumps(json.loads(fields), sort_keys=True, ensure_ascii=False)


@router.get("/audit", response_class=HTMLResponse)
def audit_page(
    request: Request,
    visit: SignedIn,
    who: Annotated[str, Query(max_length=100)] = "",
    action: Annotated[str, Query(max_length=40)] = "",
    since: Annotated[str, Query(max_length=10)] = "",
    until: Annotated[str, Query(max_length=10)] = "",
    format: Annotated[str, Query(pattern="^(html|csv)$")] = "html",
) -> Response:
    state = console_state(request)
    filters = {"who": who, "action": action, "since": since, "until": until}
    try:
        start, end = _parse_day(since, end=False), _parse_day(until, end=True)
    except ValueError:
        return page(request, "audit.html", visit,
                    {"title": "Audit", "entries": [], "filters": filters,
                     "error": "Dates are YYYY-MM-DD."}, status_code=422)  # fmt: skip
    csv_wanted = format == "csv"
    entries = audit_entries(
        state, who=who, action=action, since=start, until=end,
        limit=_EXPORTED if csv_wanted else _SHOWN,
    )  # fmt: skip
    if csv_wanted:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["at", "who", "source", "action", "subject", "detail"])
        for entry in entries:
            writer.writerow([entry.at, entry.who, entry.source, entry.action, entry.subject,
                             entry.detail])  # fmt: skip
        return Response(
            out.getvalue(), media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": 'attachment; filename="fieldsync-audit.csv"'},
        )  # fmt: skip
    query = "&".join(f"{k}={v}" for k, v in filters.items() if v)
    return page(
        request, "audit.html", visit,
        {"title": "Audit", "entries": entries, "filters": filters, "error": "",
         "csv_link": f"/console/audit?{query}&format=csv".replace("?&", "?")},
    )  # fmt: skip
