"""People (`/console/people`): devices and office users, for admins only.

Add a device (its token shown once, with a QR code of the server address and the token for
the phone's sign-in), revoke one, set who uses it and their team, and "view as this device":
the work orders its scope holds, read-only. Each change is written to the console's audit.
"""

from __future__ import annotations

from typing import Annotated, Any, cast
from urllib.parse import urlencode

import segno
from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from server.access import ALLOWED, Action, Order, Viewer, decide
from server.auth import (
    ROLES,
    AuthenticatedDevice,
    DeviceExistsError,
    add_device,
    list_devices,
    revoke_device,
    set_device,
)
from server.console.audit_log import note
from server.console.render import page
from server.console.sessions import AdminUser, Visit, checked_form, console_state
from server.console.users import list_users

__all__ = ["router", "sign_in_link"]

router = APIRouter()
DeviceName = Annotated[str, Path(min_length=1, max_length=100)]
#: The most work orders "view as this device" lists.
_SCOPE_SHOWN = 500


def sign_in_link(server_url: str, token: str) -> str:
    """What the QR code holds: the server's address and the device's token."""
    return "fieldsync://sign-in?" + urlencode({"server": server_url, "token": token})


def _people(request: Request, visit: Visit, *, error: str = "", status_code: int = 200) -> Response:
    state = console_state(request)
    return page(
        request,
        "people.html",
        visit,
        {
            "title": "People and devices",
            "office_users": list_users(state.tables),
            "devices": list_devices(state.store),
            "roles": ROLES,
            "error": error,
        },
        status_code=status_code,
    )


@router.get("/people", response_class=HTMLResponse)
def people_page(request: Request, visit: AdminUser) -> Response:
    return _people(request, visit)


@router.post("/people/devices", response_class=HTMLResponse)
async def add(request: Request, visit: AdminUser) -> Response:
    form = await checked_form(request, visit)
    state = console_state(request)
    name = str(form.get("name") or "").strip()
    role = str(form.get("role") or "worker")
    user = str(form.get("user") or "").strip() or None
    team = str(form.get("team") or "").strip()
    try:
        token = add_device(state.store, name, role, user=user, team=team)  # type: ignore[arg-type]
    except DeviceExistsError:
        return _people(request, visit, error=f"A device named {name!r} exists already "
                       "(revoked names stay taken).", status_code=409)  # fmt: skip
    except ValueError as error:
        return _people(request, visit, error=f"Cannot add the device: {error}.", status_code=422)
    note(state, visit, "device.add", name, role=role, user=user or name, team=team)
    server_url = str(request.base_url).rstrip("/")
    link = sign_in_link(server_url, token)
    qr = segno.make(link, error="m").svg_inline(scale=4, title="Sign-in code for " + name)
    response = page(
        request,
        "device_added.html",
        visit,
        {"title": f"Device {name} added", "name": name, "token": token, "qr": qr,
         "server_url": server_url},
    )  # fmt: skip
    return response


@router.post("/people/devices/{name}/revoke", response_class=HTMLResponse)
async def revoke(request: Request, visit: AdminUser, name: DeviceName) -> Response:
    await checked_form(request, visit)
    state = console_state(request)
    if not revoke_device(state.store, name):
        return _people(request, visit, error=f"No active device named {name!r}.", status_code=404)
    note(state, visit, "device.revoke", name)
    return RedirectResponse("/console/people", status_code=303)


@router.post("/people/devices/{name}", response_class=HTMLResponse)
async def change(request: Request, visit: AdminUser, name: DeviceName) -> Response:
    form = await checked_form(request, visit)
    state = console_state(request)
    user = str(form.get("user") or "").strip()
    team = str(form.get("team") or "").strip()
    try:
        changed = set_device(state.store, name, user=user, team=team)
    except ValueError as error:
        return _people(request, visit, error=f"Cannot change {name}: {error}.", status_code=422)
    if changed is None:
        return _people(request, visit, error=f"No device named {name!r}.", status_code=404)
    note(state, visit, "device.set", name, user=user, team=team)
    return RedirectResponse("/console/people", status_code=303)


@router.get("/people/devices/{name}/scope", response_class=HTMLResponse)
def view_as(request: Request, visit: AdminUser, name: DeviceName) -> Response:
    """What the device's scope holds now (the rule its feed follows), read-only."""
    state = console_state(request)
    devices, orders, pins = (
        state.store.tables.Device, state.store.tables.WorkOrder, state.store.tables.Pin,
    )  # fmt: skip
    row = devices.get_or_none(devices.name == name)
    if row is None:
        return page(request, "missing.html", visit, {"title": "No such device"}, status_code=404)
    device = AuthenticatedDevice(
        id=row.id, name=row.name, role="admin" if row.role == "admin" else "worker",
        user=row.user_name, team=row.team, legacy=bool(row.legacy_scope),
    )  # fmt: skip
    # Its feed's reach, asked of the one access rule: a Viewer that reaches everywhere only
    # when its feed does (an admin or a legacy worker), whatever the search mode.
    feed = Viewer(device.id, device.user, device.team, device.is_admin, device.sees_everything)
    scope = feed.scope
    query = orders.select().where(orders.deleted == False)  # noqa: E712 (peewee)
    user_pins = {
        p.entity_id for p in pins.select(pins.entity_id).where(pins.user_name == scope.user)
    }
    if not scope.admin:
        # The database narrows by the scope's keys; `decide` has the last word on each row.
        held = (orders.assignee == scope.user) | (orders.created_by == scope.user)
        held |= orders.id.in_(list(user_pins))
        if scope.team:
            held |= orders.team == scope.team
        query = query.where(held)
    found = query.order_by(orders.title, orders.id).limit(_SCOPE_SHOWN + 1).dicts()
    records = [
        record
        for record in cast(list[dict[str, Any]], found)
        if decide(feed, Action.READ, Order(record, pinned=record["id"] in user_pins)) == ALLOWED
    ]
    reads = Viewer.of(device, state.settings)
    return page(
        request,
        "device_scope.html",
        visit,
        {
            "title": f"As {name} sees it",
            "device": device,
            "reads_everything": reads.everywhere,
            "revoked": row.revoked_at,
            "records": records[:_SCOPE_SHOWN],
            "more": len(records) > _SCOPE_SHOWN,
        },
    )
