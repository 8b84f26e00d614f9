"""The access rule itself (server/access.py): its answers, and every route declaring its action."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import FastAPI

from server.access import (
    ALLOWED,
    HIDDEN,
    REFUSED,
    Action,
    Nothing,
    Order,
    Owned,
    Viewer,
    decide,
)
from server.app import create_app
from server.http import declare, undeclared_routes
from server.settings import Settings

ANA = Viewer(7, "ana", "north", admin=False, everywhere=False)
ANA_ALL_MODE = Viewer(7, "ana", "north", admin=False, everywhere=True)
OFFICE = Viewer(1, "office", "", admin=True, everywhere=True)
NORTH = {"assignee": "", "team": "north", "created_by": ""}
SOUTH = {"assignee": "ben", "team": "south", "created_by": "ben"}


def test_every_route_under_v1_declares_its_action(tmp_path: Path) -> None:
    app = create_app(Settings(db_url=f"sqlite:///{tmp_path / 's.sqlite3'}"))
    assert undeclared_routes(app) == []


def test_a_route_that_declares_nothing_is_named() -> None:
    app = FastAPI()

    @app.get("/v1/declared", dependencies=[declare(Action.READ)])
    def declared() -> None: ...

    @app.post("/v1/forgotten")
    def forgotten() -> None: ...

    @app.get("/healthz")
    def health() -> None: ...

    assert undeclared_routes(app) == ["POST /v1/forgotten"]


@pytest.mark.parametrize("action", list(Action))
def test_a_scoped_worker_reaches_its_scope_and_nothing_else(action: Action) -> None:
    if action is Action.DECIDE_CONFLICT:
        assert decide(ANA, action, Order(NORTH)) == REFUSED
        return
    assert decide(ANA, action, Order(NORTH)) == ALLOWED
    assert decide(ANA, action, Order(SOUTH)) == HIDDEN
    assert decide(ANA, action, Order(None)) == HIDDEN
    assert decide(ANA, action, Order(SOUTH, pinned=True)) == ALLOWED


def test_edits_of_a_held_work_order_pass_reads_of_it_do_not() -> None:
    held = {"held": 4}
    for action in (Action.WRITE, Action.ATTACH, Action.DETACH, Action.RAISE_CONFLICT):
        assert decide(ANA, action, Order(SOUTH, base_version=4, **held)) == ALLOWED
        assert decide(ANA, action, Order(SOUTH, base_version=None, **held)) == ALLOWED
        assert decide(ANA, action, Order(SOUTH, base_version=5, **held)) == HIDDEN
        assert decide(ANA, action, Order(SOUTH, base_version=4)) == HIDDEN
    for action in (Action.READ, Action.READ_FILE, Action.PIN, Action.UNPIN):
        assert decide(ANA, action, Order(SOUTH, base_version=4, **held)) == HIDDEN


def test_all_mode_and_admins_reach_every_work_order() -> None:
    for viewer in (ANA_ALL_MODE, OFFICE):
        assert decide(viewer, Action.WRITE, Order(SOUTH)) == ALLOWED
        assert decide(viewer, Action.READ_FILE, Order(SOUTH)) == ALLOWED
        assert decide(viewer, Action.READ, Order(None)) == HIDDEN
    assert decide(ANA_ALL_MODE, Action.DECIDE_CONFLICT, Nothing()) == REFUSED
    assert decide(OFFICE, Action.DECIDE_CONFLICT, Nothing()) == ALLOWED


def test_uploads_and_conflicts_belong_to_their_device() -> None:
    assert decide(ANA, Action.UPLOAD, Owned(7)) == ALLOWED
    assert decide(ANA, Action.UPLOAD, Owned(8)) == HIDDEN
    assert decide(ANA, Action.UPLOAD, Owned(None)) == HIDDEN
    assert decide(OFFICE, Action.UPLOAD, Owned(8)) == HIDDEN
    assert decide(OFFICE, Action.READ_CONFLICT, Owned(8)) == ALLOWED
    assert decide(ANA_ALL_MODE, Action.READ_CONFLICT, Owned(8)) == HIDDEN
