"""The work-order list model: pages, search, filter, and the sync badge per row."""

from __future__ import annotations

import time

from app.events import EventBus, JobStateChanged, JobStatesChanged, RecordsChanged
from app.store.errors import StorageBusyError
from app.store.queue import Outcome
from app.store.store import Store
from app.sync.pipeline import job_states_now
from tests.ui.conftest import Runner, add_orders, make_dead
from ui.services import Services
from ui.viewmodels import workorders
from ui.viewmodels.workorders import PAGE_SIZE, WorkOrderListModel


def loaded(run: Runner, model: WorkOrderListModel) -> WorkOrderListModel:
    model.reload()
    run(model.wait_idle())
    return model


def test_loads_one_page_then_more_on_demand(
    run: Runner, services: Services, root, store: Store
) -> None:
    add_orders(store, 250)
    model = loaded(run, WorkOrderListModel(services, root))
    assert model.total == 250
    assert model.rowCount() == PAGE_SIZE
    assert model.canFetchMore()
    model.fetchMore()
    run(model.wait_idle())
    assert model.rowCount() == 2 * PAGE_SIZE
    model.fetchMore()
    run(model.wait_idle())
    assert model.rowCount() == 250
    assert not model.canFetchMore()
    assert model.get(0)["title"] == "Pump check 00000"


def test_search_and_status_filter(run: Runner, services: Services, root, store: Store) -> None:
    add_orders(store, 30)
    store.record_edit("create", None, {"title": "Valve leak", "status": "in_progress"})
    model = loaded(run, WorkOrderListModel(services, root))
    model.search = "valve"
    run.until(lambda: model.total == 1)
    assert model.get(0)["title"] == "Valve leak"
    model.search = ""
    model.statusFilter = "in_progress"
    run(model.wait_idle())
    run.until(lambda: model.total == 1 and model.rowCount() == 1)
    assert model.get(0)["statusText"] == "In progress"


def test_badges_follow_the_queue(
    run: Runner, services: Services, root, store: Store, bus: EventBus
):
    (synced,) = add_orders(store, 1)
    model = loaded(run, WorkOrderListModel(services, root))
    assert model.get(0)["badge"] == "synced"

    store.record_edit("update", synced, {"notes": "checked seals"})
    store.record_edit("update", synced, {"notes": "checked seals twice"})
    bus.publish(RecordsChanged(frozenset({synced})))
    run.until(lambda: model.get(0)["badge"] == "pending")
    assert model.get(0)["badgeText"] == "Pending (2 edits)"

    (job,) = store.queue.claim("test")
    bus.publish(JobStateChanged(job.id, synced, "leased"))
    run.until(lambda: model.get(0)["badge"] == "sending")

    store.queue.retry(job, Outcome(error="connect error: no route to host"))
    (retrying,) = job_states_now(store, [job.id])  # as the engine publishes it
    assert (retrying.status, retrying.error) == ("retrying", "connect error: no route to host")
    bus.publish(JobStatesChanged((retrying,)))
    run.until(lambda: model.get(0)["badge"] == "retrying")
    assert model.get(0)["badgeText"].startswith("Retrying ")
    assert "no route to host" in model.get(0)["badgeDetail"]

    store.db.execute_sql("UPDATE jobs SET next_attempt_at = ?", (time.time() - 1,))
    jobs = store.queue.claim("test", limit=5)
    store.queue.ack_many([(j, Outcome(), 2 + i) for i, j in enumerate(jobs)])
    (second,) = store.queue.claim("test", limit=5)
    store.queue.ack(second, result_version=4)
    bus.publish(JobStateChanged(second.id, synced, "done"))
    run.until(lambda: model.get(0)["badge"] == "synced")


def test_failed_and_conflict_badges(run: Runner, services: Services, root, store: Store) -> None:
    make_dead(store, title="A dead one")
    (other,) = add_orders(store, 1, title="B conflicted")
    store.record_edit("update", other, {"notes": "mine"})
    (job,) = store.queue.claim("test")
    store.queue.conflict(job, Outcome(error="version_conflict", http_status=409))
    model = loaded(run, WorkOrderListModel(services, root))
    assert [model.get(i)["badge"] for i in range(2)] == ["failed", "conflict"]


def test_new_record_from_elsewhere_reloads(
    run: Runner, services: Services, root, store: Store, bus
):
    add_orders(store, 3)
    model = loaded(run, WorkOrderListModel(services, root))
    result = store.record_edit("create", None, {"title": "AAA first"})
    bus.publish(RecordsChanged(frozenset({result.entity_id})))
    run.until(lambda: model.total == 4 and model.get(0)["title"] == "AAA first")
    assert model.get(0)["badge"] == "pending"


def test_a_store_error_while_loading_is_told_not_stuck(
    run: Runner, services: Services, root, store: Store, monkeypatch
) -> None:
    # Before: "loading" stayed on for good (no more pages were fetched) and the error went to
    # the "Fieldsync ran into a bug" dialog, though a locked or full store is no bug.
    add_orders(store, 3)
    model = loaded(run, WorkOrderListModel(services, root))

    def locked(*args: object) -> object:
        raise StorageBusyError("the database is busy (another process holds it)")

    monkeypatch.setattr(workorders, "_load_page", locked)
    told: list[str] = []
    model.message.connect(told.append)
    model.search = "pump"
    run.until(lambda: bool(told))
    assert not model.loading
    assert told == ["the database is busy (another process holds it)"]

    monkeypatch.undo()
    model.search = "pump check 00001"
    run.until(lambda: model.total == 1)


def test_edits_held_behind_a_failed_one_are_shown(
    run: Runner, services: Services, root, store: Store
) -> None:
    make_dead(store)
    entity = store.db.execute_sql("SELECT entity_key FROM jobs").fetchone()[0]
    store.record_edit("update", entity, {"notes": "checked again"})
    store.record_edit("update", entity, {"notes": "and again"})
    row = loaded(run, WorkOrderListModel(services, root)).get(0)
    assert row["badge"] == "failed"
    assert row["badgeText"] == "Failed (+2 held)"
    assert row["badgeDetail"].endswith("2 later edits wait behind it.")
