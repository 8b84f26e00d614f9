"""One work order in the console: create, read, edit, its photos and its history."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.records import EDITABLE_FIELDS
from server.console.change_words import change_history
from server.console.render import iso_at, page
from server.console.sessions import SignedIn, Visit, checked_form, console_state
from server.console.work_edits import EditRefused, create_work_order, edit_work_order
from server.console.work_orders import STATUSES
from server.http import ServerContext
from server.records.mutations import record_json
from server.uploads.attachments import attachments_of

__all__ = ["router"]

router = APIRouter()
EntityId = Annotated[str, Path(min_length=1, max_length=36)]
PRIORITIES = ("low", "normal", "high")
_FORM_FIELDS = [name for name in EDITABLE_FIELDS if name != "deleted"]


def _fields_of(form: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name in _FORM_FIELDS:
        if name in form:
            value = str(form.get(name))
            fields[name] = (value or None) if name == "due_date" else value
    return fields


def _history(request: Request, entity_id: str) -> list[dict[str, Any]]:
    """The console's own entries and the review queue's, newest first (the change log's,
    field by field, are `changes`)."""
    state = console_state(request)
    audit, conflicts, decisions = (
        state.tables.Audit, state.store.tables.Conflict, state.store.tables.ConflictAudit,
    )  # fmt: skip
    entries = [
        {"at": iso_at(row.at), "who": f"{row.actor} (console)", "what": row.action,
         "detail": json.loads(row.detail)}
        for row in audit.select().where(audit.subject == entity_id)
    ]  # fmt: skip
    raised = conflicts.select(conflicts.id).where(conflicts.entity_id == entity_id)
    for row in decisions.select().where(decisions.conflict_id.in_(raised)):
        entries.append({"at": row.at, "who": row.actor, "what": f"conflict.{row.action}",
                        "detail": json.loads(row.chosen)})  # fmt: skip
    return sorted(entries, key=lambda entry: str(entry["at"]), reverse=True)


def _detail(
    request: Request, visit: Visit, entity_id: str, *, error: str = "",
    typed: dict[str, Any] | None = None, status_code: int = 200,
) -> Response:  # fmt: skip
    state = console_state(request)
    orders = state.store.tables.WorkOrder
    row = orders.get_or_none(orders.id == entity_id)
    if row is None:
        return page(request, "missing.html", visit, {"title": "No such work order"},
                    status_code=404)  # fmt: skip
    record = record_json(row)
    files = attachments_of(state.store, [row.id]).get(row.id, [])
    return page(
        request,
        "work_order.html",
        visit,
        {
            "title": record["title"],
            "record": record,
            "values": {**record, **(typed or {})},
            "files": files,
            "changes": change_history(state.store, entity_id),
            "history": _history(request, entity_id),
            "statuses": STATUSES,
            "priorities": PRIORITIES,
            "error": error,
        },
        status_code=status_code,
    )


@router.get("/work-orders/new", response_class=HTMLResponse)
def new_page(request: Request, visit: SignedIn) -> Response:
    return page(
        request, "work_order_new.html", visit,
        {"title": "New work order", "values": {}, "statuses": STATUSES,
         "priorities": PRIORITIES, "error": ""},
    )  # fmt: skip


@router.post("/work-orders/new", response_class=HTMLResponse)
async def create(request: Request, visit: SignedIn) -> Response:
    form = await checked_form(request, visit)
    fields = _fields_of(form)
    try:
        record = create_work_order(console_state(request), visit, fields)
    except EditRefused as refused:
        return page(
            request, "work_order_new.html", visit,
            {"title": "New work order", "values": fields, "statuses": STATUSES,
             "priorities": PRIORITIES, "error": refused.words},
            status_code=refused.status,
        )  # fmt: skip
    return RedirectResponse(f"/console/work-orders/{record['id']}", status_code=303)


@router.get("/work-orders/{entity_id}", response_class=HTMLResponse)
def work_order_page(request: Request, visit: SignedIn, entity_id: EntityId) -> Response:
    return _detail(request, visit, entity_id)


@router.post("/work-orders/{entity_id}", response_class=HTMLResponse)
async def edit(request: Request, visit: SignedIn, entity_id: EntityId) -> Response:
    form = await checked_form(request, visit)
    fields = _fields_of(form)
    try:
        base_version = int(str(form.get("base_version") or "0"))
        edit_work_order(console_state(request), visit, entity_id, base_version, fields)
    except ValueError:
        return _detail(request, visit, entity_id, error="The form lost its version: reload.",
                       status_code=422)  # fmt: skip
    except EditRefused as refused:
        kept = None if refused.status == 409 else fields
        return _detail(request, visit, entity_id, error=refused.words, typed=kept,
                       status_code=refused.status)  # fmt: skip
    return RedirectResponse(f"/console/work-orders/{entity_id}", status_code=303)


@router.get("/attachments/{attachment_id}/thumbnail", response_class=Response)
def thumbnail(request: Request, visit: SignedIn, attachment_id: EntityId) -> Response:
    """A photo's thumbnail for the console (the API's needs a device token)."""
    context: ServerContext = request.app.state.server
    files = context.store.tables.Attachment
    row = files.get_or_none(files.id == attachment_id, files.deleted == False)  # noqa: E712
    if row is None or not row.content_type.startswith("image/"):
        return Response(status_code=404)
    path = context.blobs.thumbnail(row.sha256)
    if path is None:
        return Response(status_code=415)
    return Response(path.read_bytes(), media_type="image/jpeg",
                    headers={"Cache-Control": "private, max-age=3600"})  # fmt: skip
