"""Work orders (`/console/work-orders`): search, filters, and reassigning one or many.

Search goes through the same trigram index as `GET /v1/records?q=` (server/records/search.py);
the filters (team, assignee, status) narrow what it found, or list by id without a search.
A bulk reassignment asks the person to type how many work orders it changes.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.records import Status
from server.console.render import page
from server.console.sessions import SignedIn, Visit, checked_form, console_state
from server.console.work_edits import EditRefused, reassign
from server.db.store import Store
from server.records.search import find_work_orders

__all__ = ["find_for_office", "router"]

router = APIRouter()
PAGE_SIZE = 50
STATUSES: tuple[str, ...] = Status.__args__  # type: ignore[attr-defined]


def find_for_office(
    store: Store,
    text: str,
    *,
    team: str = "",
    assignee: str = "",
    status: str = "",
    after: str = "",
    count: int = PAGE_SIZE,
) -> list[dict[str, Any]]:
    """Up to `count` work orders (not deleted) after id `after`, matching what is given."""
    wanted = {k: v for k, v in (("team", team), ("assignee", assignee), ("status", status)) if v}
    if text:
        found: list[dict[str, Any]] = []
        # The index answers in id order; filters drop some, so read on until the page fills.
        while len(found) < count:
            batch = find_work_orders(store, text, after, count * 4)
            found += [row for row in batch if all(row[k] == v for k, v in wanted.items())]
            if len(batch) < count * 4:
                break
            after = batch[-1]["id"]
        return found[:count]
    orders = store.tables.WorkOrder
    query = orders.select().where(orders.deleted == False, orders.id > after)  # noqa: E712
    for name, value in wanted.items():
        query = query.where(getattr(orders, name) == value)
    rows: list[dict[str, Any]] = list(query.order_by(orders.id).limit(count).dicts().iterator())
    return rows


def _list(
    request: Request, visit: Visit, values: dict[str, str], *, error: str = "",
    status_code: int = 200,
) -> Response:  # fmt: skip
    state = console_state(request)
    rows = find_for_office(
        state.store, values["q"].strip(), team=values["team"], assignee=values["assignee"],
        status=values["status"], after=values["after"], count=PAGE_SIZE + 1,
    )  # fmt: skip
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    return page(
        request,
        "work_orders.html",
        visit,
        {
            "title": "Work orders",
            "rows": rows,
            "next_after": rows[-1]["id"] if more else "",
            "filters": values,
            "statuses": STATUSES,
            "error": error,
        },
        status_code=status_code,
    )


@router.get("/work-orders", response_class=HTMLResponse)
def work_orders_page(
    request: Request,
    visit: SignedIn,
    q: Annotated[str, Query(max_length=200)] = "",
    team: Annotated[str, Query(max_length=100)] = "",
    assignee: Annotated[str, Query(max_length=200)] = "",
    status: Annotated[str, Query(max_length=16)] = "",
    after: Annotated[str, Query(max_length=36)] = "",
) -> Response:
    values = {"q": q, "team": team, "assignee": assignee, "status": status, "after": after}
    return _list(request, visit, values)


@router.post("/work-orders/reassign", response_class=HTMLResponse)
async def reassign_many(request: Request, visit: SignedIn) -> Response:
    """Reassign the ticked work orders; more than one needs their count typed to confirm."""
    form = await checked_form(request, visit)
    state = console_state(request)
    ids = [str(value) for value in form.getlist("ids")]
    values = {name: str(form.get(name) or "") for name in ("q", "team", "assignee", "status")}
    values["after"] = ""
    new_assignee = str(form.get("new_assignee") or "").strip() or None
    new_team = str(form.get("new_team") or "").strip() or None
    if not ids:
        return _list(request, visit, values, error="Tick the work orders to reassign.",
                     status_code=422)  # fmt: skip
    typed = str(form.get("confirm_count") or "").strip()
    if len(ids) > 1 and typed != str(len(ids)):
        words = f"This changes {len(ids)} work orders: type {len(ids)} to confirm."
        return _list(request, visit, values, error=words, status_code=422)
    try:
        changed = reassign(state, visit, ids, assignee=new_assignee, team=new_team)
    except EditRefused as refused:
        return _list(request, visit, values, error=refused.words, status_code=refused.status)
    query = "&".join(f"{k}={v}" for k, v in values.items() if v)
    return RedirectResponse(
        f"/console/work-orders?{query}&reassigned={changed}".replace("?&", "?"), status_code=303
    )
