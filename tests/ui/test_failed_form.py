"""The failed-changes page fixes a refused change in the editor's form (issue 12, item 4).

A change the real server refused on a field is shown as the editor's fields with the server's
reason beside that field; the person edits it there and presses Retry: the job goes back to
the queue under a new idempotency key and the work order on this device shows the edit.
Assertions read the visible text on screen at a phone's size.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from app.states import Reason
from app.store.queue import Outcome
from app.store.store import Store
from server.embedded import EmbeddedServer
from tests.ui.conftest import Device, Open, Runner, mark_synced
from tests.ui.qml_driver import click, find, screenshot, shown_texts, shows, type_into


def refused_by_the_server(run: Runner, store: Store, server: EmbeddedServer, device: Device) -> int:
    """A create whose title the server refuses (as an older app version could have queued
    it: the payload is changed under the queue), delivered to the real server until dead."""
    entity_id = str(uuid.uuid4())
    job_id = store.record_edit("create", entity_id, {"title": "Pump", "site": "North yard"}).job_id
    (payload,) = store.db.execute_sql("SELECT payload FROM jobs WHERE id = ?", (job_id,)).fetchone()
    stored = json.loads(payload)
    stored["fields"]["title"] = "T" * 300
    store.db.execute_sql("UPDATE jobs SET payload = ? WHERE id = ?", (json.dumps(stored), job_id))
    device.sign_in(server, "phone-1")
    device.start()
    status = lambda: store.db.execute_sql(  # noqa: E731
        "SELECT status FROM jobs WHERE id = ?", (job_id,)
    ).fetchone()[0]
    run.until(lambda: status() == "dead", 15)
    device.stop()
    return job_id


def key_of(store: Store, job_id: int) -> str:
    row = store.db.execute_sql("SELECT idempotency_key FROM jobs WHERE id = ?", (job_id,))
    return str(row.fetchone()[0])


def test_a_refused_field_is_fixed_in_the_form_and_retried_under_a_new_key(
    run: Runner,
    open_window: Open,
    store: Store,
    server: EmbeddedServer,
    device: Device,
    artifacts: Path,
) -> None:
    job_id = refused_by_the_server(run, store, server, device)
    key_before = key_of(store, job_id)
    app_vm, window = open_window(360, 720)
    app_vm.open("dead")
    run(app_vm.wait_idle())
    run.until(lambda: app_vm.deadLetters.count == 1)
    click(window, find(window, "deadRow_0"))  # selects it and scrolls to its form
    title = find(window, "failed_titleField")
    # The form is on screen: the editor's fields, the title's reason beside it.
    run.until(lambda: title.isVisible() and title.property("text") == "T" * 300)
    run.pause(0.2)
    reason = find(window, "failed_titleError")
    assert reason.isVisible()
    assert "at most 200 characters" in reason.property("text")
    screenshot(window, artifacts / "dead-form-360x720-light.png")
    on_screen = [text for text, _ in shown_texts(window)]
    assert shows(window, "Fix and retry"), on_screen
    assert shows(window, "at most 200 characters"), on_screen
    assert shows(window, "Site"), on_screen
    assert not find(window, "payloadEditor").isVisible()  # the JSON is behind "Details"
    assert not shows(window, "'loc'"), on_screen  # the raw reply only in Details
    # An edit the contract refuses is marked on the field and nothing is sent.
    title.setProperty("text", "")
    type_into(window, title, " ")
    click(window, find(window, "retryButton"))
    run.until(lambda: "at most 200" not in reason.property("text") and reason.isVisible())
    assert app_vm.deadLetters.count == 1
    assert key_of(store, job_id) == key_before
    title.setProperty("text", "")
    type_into(window, title, "Pump house")
    run.until(lambda: find(window, "retryButton").property("text") == "Retry with my edits")
    click(window, find(window, "retryButton"))
    run.until(lambda: app_vm.deadLetters.count == 0, 5)
    status, key_after = store.db.execute_sql(
        "SELECT status, idempotency_key FROM jobs WHERE id = ?", (job_id,)
    ).fetchone()
    assert status == "pending"
    assert key_after != key_before
    (entity_id,) = store.db.execute_sql(
        "SELECT entity_key FROM jobs WHERE id = ?", (job_id,)
    ).fetchone()
    assert store.cache.get(entity_id)["title"] == "Pump house"


def dead_edit(store: Store, op: str, fields: dict[str, str], error: str) -> int:
    """A synced work order whose update or delete the server refused with ``error``."""
    (entity_id,) = store.import_records([{"id": str(uuid.uuid4()), "title": "Gate"}])
    mark_synced(store)
    job_id = store.record_edit(op, entity_id, fields).job_id
    (job,) = store.queue.claim("test")
    store.queue.dead(job, Outcome(error=error, http_status=422, code=Reason.INVALID))
    return job_id


def test_an_update_shows_only_the_fields_it_sets_and_a_delete_no_form(
    run: Runner, open_window: Open, store: Store
) -> None:
    dead_edit(store, "update", {"site": "Yard 9"}, "validation_error: site: not a known site")
    app_vm, window = open_window(360, 720)
    app_vm.open("dead")
    run(app_vm.wait_idle())
    run.until(lambda: app_vm.deadLetters.count == 1)
    click(window, find(window, "deadRow_0"))
    site = find(window, "failed_siteField")
    run.until(lambda: site.isVisible() and site.property("text") == "Yard 9")
    run.pause(0.2)
    on_screen = [text for text, _ in shown_texts(window)]
    assert shows(window, "Not a known site"), on_screen
    assert not find(window, "failed_titleField").isVisible()
    assert not find(window, "failed_notesField").isVisible()
    # Unchanged, Retry sends it as it was: the same idempotency key.
    job_id = app_vm.deadLetters.selectedJobId
    key_before = key_of(store, job_id)
    assert find(window, "retryButton").property("text") == "Retry"
    click(window, find(window, "retryButton"))
    run.until(lambda: app_vm.deadLetters.count == 0, 5)
    assert key_of(store, job_id) == key_before


def test_a_refused_delete_offers_retry_and_discard_without_a_form(
    run: Runner, open_window: Open, store: Store
) -> None:
    dead_edit(store, "delete", {}, "refused by the server (403)")
    app_vm, window = open_window(360, 720)
    app_vm.open("dead")
    run(app_vm.wait_idle())
    run.until(lambda: app_vm.deadLetters.count == 1)
    click(window, find(window, "deadRow_0"))
    run.until(lambda: find(window, "discardButton").isVisible())
    run.pause(0.2)
    assert not find(window, "failedForm").isVisible()
    assert find(window, "retryButton").isVisible()
    on_screen = [text for text, _ in shown_texts(window)]
    assert shows(window, "refused by the server (403)"), on_screen


def test_choosing_another_row_asks_before_the_form_loses_its_edits(
    run: Runner, open_window: Open, store: Store
) -> None:
    dead_edit(store, "update", {"site": "Yard 9"}, "validation_error: site: not a known site")
    dead_edit(store, "update", {"site": "Yard 12"}, "validation_error: site: not a known site")
    app_vm, window = open_window(360, 720)
    app_vm.open("dead")
    run(app_vm.wait_idle())
    run.until(lambda: app_vm.deadLetters.count == 2)
    site = find(window, "failed_siteField")
    click(window, find(window, "deadRow_0"))
    run.until(lambda: site.isVisible() and site.property("text") in ("Yard 9", "Yard 12"))
    first = site.property("text")
    other = "Yard 12" if first == "Yard 9" else "Yard 9"
    question = "Discard your changes to this failed change?"
    # Another row without edits: no question, the other change is shown.
    click(window, find(window, "deadRow_1"))
    run.until(lambda: site.property("text") == other)
    click(window, find(window, "deadRow_0"))
    run.until(lambda: site.property("text") == first)
    type_into(window, site, "North yard")
    run.until(lambda: find(window, "retryButton").property("text") == "Retry with my edits")
    # With edits, choosing the other row asks first and keeps the edit on screen.
    click(window, find(window, "deadRow_1"))
    run.until(lambda: find(window, "keepEditingButton").isVisible())
    run.pause(0.2)
    on_screen = [text for text, _ in shown_texts(window)]
    assert shows(window, question), on_screen
    assert shows(window, "Keep editing"), on_screen
    assert site.property("text") == "North yard"
    click(window, find(window, "keepEditingButton"))
    run.until(lambda: not find(window, "confirmLeaveForm").isVisible())
    assert not shows(window, question)
    assert site.property("text") == "North yard"
    assert find(window, "retryButton").property("text") == "Retry with my edits"
    # Asked again, "Discard" drops the edit and shows the row that was chosen.
    click(window, find(window, "deadRow_1"))
    run.until(lambda: find(window, "discardEditsButton").isVisible())
    click(window, find(window, "discardEditsButton"))
    run.until(lambda: site.property("text") == other)
    assert not find(window, "confirmLeaveForm").isVisible()
    click(window, find(window, "deadRow_0"))
    run.until(lambda: site.property("text") == first)  # the stored value, the edit is gone
    assert not find(window, "confirmLeaveForm").isVisible()
    assert app_vm.deadLetters.count == 2  # nothing was sent or discarded
