"""The admin review inbox against the real server's review queue (in-process, port 0)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import shiboken6

from app.sync.transport import ServerClient
from server.embedded import EmbeddedServer
from tests.ui.conftest import Runner
from tests.ui.qml_driver import check_phone_layout, click, find, screenshot
from ui.qt import QQmlApplicationEngine
from ui.services import Services
from ui.viewmodels.app import AppViewModel
from ui.viewmodels.review import ReviewViewModel
from ui.window import load_window


def _post(server: EmbeddedServer, token: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = httpx.post(
        f"{server.base_url}{path}",
        json=body,
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": str(uuid.uuid4())},
        timeout=10,
    )
    assert reply.status_code in (200, 201), reply.text
    return dict(reply.json())


def escalate(server: EmbeddedServer, token: str, title: str, mine: dict[str, Any]) -> str:
    """A work order on the server, then a worker's conflicting edit sent for review."""
    entity_id = str(uuid.uuid4())
    _post(
        server,
        token,
        "/v1/mutations",
        {
            "entity_id": entity_id,
            "op": "create",
            "base_version": None,
            "fields": {"title": title, "site": "North yard", "notes": "server notes"},
        },
    )
    _post(
        server,
        token,
        "/v1/conflicts",
        {"entity_id": entity_id, "base_version": 1, "mine": mine, "note": "please check"},
    )
    return entity_id


@pytest.fixture
def inbox(server: EmbeddedServer) -> dict[str, Any]:
    worker = server.add_device("phone-7")
    first = escalate(server, worker, "Older: gate", {"notes": "hinge replaced"})
    second = escalate(
        server, worker, "Newer: boiler", {"notes": "pressure ok", "site": "North yard"}
    )
    admin = server.add_device("admin-1", "admin")
    return {"worker": worker, "admin": admin, "ids": [first, second]}


@pytest.fixture
def client_for(run: Runner, server: EmbeddedServer) -> Iterator[Any]:
    clients: list[ServerClient] = []

    def make(token: str) -> ServerClient:
        clients.append(ServerClient(server.base_url, lambda: token))
        return clients[-1]

    yield make
    for client in clients:
        run(client.aclose())


def test_view_model_lists_newest_first_resolves_per_field_and_dismisses(
    run: Runner, server: EmbeddedServer, inbox: dict[str, Any], client_for: Any, root: Any
) -> None:
    vm = ReviewViewModel(client_for(inbox["admin"]), root)
    vm.refresh()
    run(vm.wait_idle())
    assert vm.available
    assert [c["title"] for c in vm.openConflicts] == ["Newer: boiler", "Older: gate"]
    assert vm.openConflicts[0]["device"] == "phone-7"

    vm.openReview(vm.openConflicts[0]["reviewId"])
    fields = {f["name"]: f for f in vm.fields}
    assert fields["notes"]["mine"] == "pressure ok"
    assert fields["notes"]["server"] == "server notes"
    assert fields["notes"]["needsChoice"]
    assert not fields["site"]["needsChoice"]  # same on both sides
    assert "phone-7" in vm.explanation
    assert "please check" in vm.explanation
    assert not vm.canResolve
    vm.choose("notes", "mine")
    assert vm.canResolve
    vm.resolve()
    run(vm.wait_idle())
    record = server.store.tables.WorkOrder.get(id=inbox["ids"][1])
    assert (record.notes, record.version) == ("pressure ok", 2)
    assert [c["title"] for c in vm.openConflicts] == ["Older: gate"]

    vm.openReview(vm.openConflicts[0]["reviewId"])
    vm.dismiss()
    run(vm.wait_idle())
    assert vm.openConflicts == []
    assert server.store.tables.WorkOrder.get(id=inbox["ids"][0]).notes == "server notes"
    decisions = vm.decisions
    assert [(d["title"], d["status"]) for d in decisions] == [
        ("Older: gate", "dismissed"),
        ("Newer: boiler", "resolved"),
    ]
    assert all(d["decidedBy"] == "admin-1" and d["decidedAt"] != "—" for d in decisions)
    assert decisions[0]["text"].startswith("Dismissed by admin-1 at ")


def test_worker_token_sees_no_inbox(
    run: Runner, inbox: dict[str, Any], client_for: Any, root: Any
) -> None:
    vm = ReviewViewModel(client_for(inbox["worker"]), root)
    vm.refresh()
    run(vm.wait_idle())
    assert not vm.available
    assert vm.openConflicts == []
    assert "admin" in vm.notice


def test_review_page_driven_and_captured(
    run: Runner,
    services: Services,
    inbox: dict[str, Any],
    client_for: Any,
    root: Any,
    artifacts: Path,
    server: EmbeddedServer,
) -> None:
    services.review_client = client_for(inbox["admin"])
    app_vm = AppViewModel(services, root)
    qml = QQmlApplicationEngine()
    window = load_window(qml, app_vm, 360, 720, dark=False)
    try:
        app_vm.start()
        run(app_vm.wait_idle())
        click(window, find(window, "menuButton"))
        run.until(lambda: find(window, "menuReview").isVisible())
        run.pause(0.4)  # the menu's opening transition
        click(window, find(window, "menuReview"))
        run(app_vm.wait_idle())
        assert app_vm.page == "review"
        run.pause(0.05)
        check_phone_layout(window)
        screenshot(window, artifacts / "review-inbox-360x720-light.png")
        click(window, find(window, "reviewRow_0"))
        run.until(lambda: app_vm.review.hasCurrent)
        run.pause(0.05)
        assert "Newer: boiler" in find(window, "reviewTitle").property("text")
        assert not find(window, "reviewResolveButton").isEnabled()
        click(window, find(window, "reviewMine_notes"))
        run.until(lambda: find(window, "reviewResolveButton").isEnabled())
        check_phone_layout(window)
        screenshot(window, artifacts / "review-conflict-360x720-light.png")
        click(window, find(window, "reviewResolveButton"))
        run.until(lambda: len(app_vm.review.decisions) == 1)
        assert server.store.tables.WorkOrder.get(id=inbox["ids"][1]).notes == "pressure ok"

        window.setWidth(1280)
        window.setHeight(800)
        run.pause(0.1)
        screenshot(window, artifacts / "review-inbox-1280x800-light.png")
        click(window, find(window, "reviewRow_0"))
        run.until(lambda: app_vm.review.hasCurrent)
        run.pause(0.1)
        screenshot(window, artifacts / "review-conflict-1280x800-light.png")
        click(window, find(window, "reviewDismissButton"))
        run.until(lambda: len(app_vm.review.decisions) == 2)
        run.pause(0.1)
        assert "Dismissed by admin-1" in find(window, "decision_0").property("text")
        screenshot(window, artifacts / "review-decided-1280x800-light.png")
    finally:
        run(app_vm.aclose())
        window.close()
        shiboken6.delete(qml)
