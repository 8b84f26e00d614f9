"""What the device holds (issue 16), at the store: departures, list filters, pins asked here."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from app.store.db import WriteTransaction, connection
from app.store.editing import hold_for_editing, release_all_editing, release_editing
from app.store.errors import InvalidEditError
from app.store.queue import Outcome
from app.store.scope import (
    NO_LONGER_ASSIGNED,
    REMOVE_DEPARTED,
    Identity,
    apply_departures,
    discard_left_scope,
    pending_pins,
    pin_refused,
    pin_sent,
    read_identity,
    remove_departed,
    request_pin,
    returned_to_scope,
    write_identity,
)
from app.store.store import Store
from app.sync.reconcile import apply_page


def server_record(**fields: Any) -> dict[str, Any]:
    record = {
        "id": str(uuid.uuid4()),
        "version": 1,
        "title": "Pump",
        "site": "",
        "status": "open",
        "priority": "normal",
        "notes": "",
        "assignee": "ana",
        "team": "north",
        "due_date": None,
        "deleted": False,
    }
    record.update(fields)
    return record


def pulled(store: Store, *records: dict[str, Any], departures: tuple[str, ...] = ()) -> Any:
    return apply_page(store, list(records), "7", departures)


def test_a_departed_work_order_without_edits_leaves_at_once(store: Store) -> None:
    record = server_record()
    pulled(store, record)
    page = pulled(store, departures=(record["id"],))
    assert page.removed == {record["id"]}
    assert store.cache.get(record["id"]) is None


def test_a_departed_work_order_with_an_unsent_edit_stays_until_it_is_delivered(
    store: Store,
) -> None:
    record = server_record()
    pulled(store, record)
    store.record_edit("update", record["id"], {"notes": "seal leaks"})
    page = pulled(store, departures=(record["id"],))
    assert page.kept_unsent == {record["id"]}
    row = store.cache.get(record["id"])
    assert row is not None
    assert row["no_longer_assigned"] is True
    assert row["notes"] == "seal leaks", "what was typed is still shown"

    [job] = store.queue.claim("w")
    store.queue.ack(job, result_version=2)
    with WriteTransaction(store.db, store.path) as conn:
        assert remove_departed(conn) == {record["id"]}
    assert store.cache.get(record["id"]) is None


@pytest.mark.parametrize("held", ["dead", "conflict", "leased"])
def test_every_unacknowledged_edit_keeps_a_departed_work_order(store: Store, held: str) -> None:
    record = server_record()
    pulled(store, record)
    store.record_edit("update", record["id"], {"notes": "typed"})
    [job] = store.queue.claim("w")
    if held == "dead":
        store.queue.dead(job, Outcome(error="HTTP 422"))
    elif held == "conflict":
        store.queue.conflict(job, Outcome(error="HTTP 409"))
    pulled(store, departures=(record["id"],))
    with WriteTransaction(store.db, store.path) as conn:
        assert remove_departed(conn) == set()
    assert store.cache.get(record["id"]) is not None


def test_a_work_order_back_in_the_scope_is_an_ordinary_one_again(store: Store) -> None:
    record = server_record()
    pulled(store, record)
    store.record_edit("update", record["id"], {"notes": "typed"})
    pulled(store, departures=(record["id"],))
    pulled(store, {**record, "version": 2, "assignee": "ana"})
    row = store.cache.get(record["id"])
    assert row is not None
    assert row["no_longer_assigned"] is False
    [job] = store.queue.claim("w")
    store.queue.ack(job, result_version=3)
    with WriteTransaction(store.db, store.path) as conn:
        assert remove_departed(conn) == set()


def test_the_last_entry_of_an_id_in_a_page_counts(store: Store) -> None:
    from app.sync.scope import split_feed

    back = server_record()
    gone = server_record()
    records, departures = split_feed(
        [
            {"id": back["id"], "out_of_scope": True},
            back,
            gone,
            {"id": gone["id"], "out_of_scope": True},
        ]
    )
    assert records == [back]
    assert departures == [gone["id"]]


def test_discarding_the_edits_of_a_departed_work_order_removes_it(store: Store) -> None:
    record = server_record()
    pulled(store, record)
    store.record_edit("update", record["id"], {"notes": "first"})
    store.record_edit("update", record["id"], {"notes": "second"})
    kept = server_record()
    pulled(store, kept)
    with pytest.raises(InvalidEditError, match="not one that left"):
        discard_left_scope(store, kept["id"])
    pulled(store, departures=(record["id"],))
    entries = discard_left_scope(store, record["id"])
    assert [e["payload"]["fields"]["notes"] for e in entries] == ["first", "second"]
    assert store.cache.get(record["id"]) is None
    audit = connection(store.db).execute(
        "SELECT COUNT(*) FROM audit_log WHERE action = 'discard' AND entity_key = ?",
        (record["id"],),
    )
    assert audit.fetchone() == (2,), "what was typed is kept in the audit log"


def test_list_filters_follow_who_the_server_says_the_device_is(store: Store) -> None:
    mine = server_record(title="Mine", assignee="ana", team="south")
    team = server_record(title="Team", assignee="bo", team="north")
    pinned = server_record(title="Pinned", assignee="cy", team="east", pinned=True)
    pulled(store, mine, team, pinned)

    def titles(scope: Any) -> list[str]:
        return [row["title"] for row in store.cache.query(scope=scope)]

    assert titles("mine") == [], "unknown identity: no guess"
    assert titles("team") == []
    assert titles("pinned") == ["Pinned"]
    write_identity(store, Identity(device="phone-a", user="ana", team="north", role="worker"))
    assert read_identity(store) == Identity("phone-a", "ana", "north", "worker")
    assert titles("mine") == ["Mine"]
    assert titles("team") == ["Team"]
    assert titles("all") == ["Mine", "Pinned", "Team"]
    assert store.cache.count(scope="team") == 1
    assert all(row["available_offline"] for row in store.cache.query())
    with pytest.raises(ValueError, match="unknown list scope"):
        store.cache.query(scope="theirs")  # type: ignore[arg-type]


def test_a_reply_without_pinned_keeps_the_pin(store: Store) -> None:
    record = server_record(pinned=True)
    pulled(store, record)
    reply = {k: v for k, v in record.items() if k != "pinned"}
    pulled(store, {**reply, "version": 2})
    row = store.cache.get(record["id"])
    assert row is not None
    assert row["pinned"] is True
    pulled(store, {**record, "version": 3, "pinned": False})
    row = store.cache.get(record["id"])
    assert row is not None
    assert row["pinned"] is False


def test_a_pin_asked_offline_shows_until_the_server_has_it(store: Store) -> None:
    record = server_record()
    pulled(store, record)
    request_pin(store, record["id"], True)
    assert pending_pins(store) == [(record["id"], True)]
    pulled(store, {**record, "version": 2, "pinned": False})  # the pull before it was sent
    row = store.cache.get(record["id"])
    assert row is not None
    assert row["pinned"] is True
    request_pin(store, record["id"], False)  # the last request wins
    assert pending_pins(store) == [(record["id"], False)]
    pin_sent(store, record["id"], True)  # a stale answer does not drop the newer request
    assert pending_pins(store) == [(record["id"], False)]
    pin_sent(store, record["id"], False)
    assert pending_pins(store) == []


def test_a_refused_pin_shows_what_the_server_said(store: Store) -> None:
    record = server_record(pinned=False)
    pulled(store, record)
    request_pin(store, record["id"], True)
    pin_refused(store, record["id"], True)
    row = store.cache.get(record["id"])
    assert row is not None
    assert row["pinned"] is False
    assert pending_pins(store) == []


def test_returned_to_scope_touches_only_marked_rows(store: Store) -> None:
    record = server_record()
    pulled(store, record)
    store.record_edit("update", record["id"], {"notes": "typed"})
    with WriteTransaction(store.db, store.path) as conn:
        assert apply_departures(conn, [record["id"]], 5.0) == (set(), {record["id"]})
        returned_to_scope(conn, [record["id"]])
    row = store.cache.get(record["id"])
    assert row is not None
    assert row["left_scope_at"] is None
    assert NO_LONGER_ASSIGNED == "No longer assigned to you"
    assert row["no_longer_assigned"] is False


def test_settling_departures_after_a_delivery_reads_only_departed_rows(store: Store) -> None:
    """`remove_departed` runs in every delivery's transaction: it must not scan the cache."""
    pulled(store, *(server_record(title=f"WO {n}") for n in range(50)))
    plan = " ".join(
        str(row[3]) for row in connection(store.db).execute(f"EXPLAIN QUERY PLAN {REMOVE_DEPARTED}")
    )
    assert "USING INDEX work_orders_left_scope" in plan
    assert "USING INDEX jobs_entity_open" in plan


def test_an_unsent_photo_keeps_a_departed_work_order_until_it_is_uploaded(
    store: Store, tmp_path: Any
) -> None:
    from app.attachments import Attachments
    from app.store.jobs import TOPIC_ATTACHMENTS

    record = server_record()
    pulled(store, record)
    photo = tmp_path / "pump.jpg"
    photo.write_bytes(b"\xff\xd8\xff" + b"0" * 1000)
    Attachments(store).attach(record["id"], photo)
    page = pulled(store, departures=(record["id"],))
    assert page.kept_unsent == {record["id"]}
    row = store.cache.get(record["id"])
    assert row is not None
    assert row["no_longer_assigned"] is True

    [upload] = store.queue.claim("w", topic=TOPIC_ATTACHMENTS)
    store.queue.ack(upload)
    page = pulled(store)  # the next pull settles it
    assert page.removed == {record["id"]}
    assert store.cache.get(record["id"]) is None


def test_a_work_order_open_in_the_editor_stays_until_the_editor_lets_go(store: Store) -> None:
    record, other = server_record(), server_record()
    pulled(store, record, other)
    assert hold_for_editing(store, record["id"]) is True
    page = pulled(store, departures=(record["id"], other["id"]))
    assert page.removed == {other["id"]}
    assert page.kept_unsent == {record["id"]}
    row = store.cache.get(record["id"])
    assert row is not None
    assert row["no_longer_assigned"] is True

    # A delivery of another edit settles departures: the open one stays all the same.
    store.record_edit("update", record["id"], {"notes": "typed"})
    [job] = store.queue.claim("w")
    store.queue.ack(job, result_version=2)
    with WriteTransaction(store.db, store.path) as conn:
        assert remove_departed(conn) == set()
    assert release_editing(store, record["id"]) == {record["id"]}
    assert store.cache.get(record["id"]) is None
    assert hold_for_editing(store, record["id"]) is False, "gone: nothing to hold"


def test_discarding_a_departed_work_order_open_in_the_editor_removes_it(store: Store) -> None:
    record = server_record()
    pulled(store, record)
    hold_for_editing(store, record["id"])
    pulled(store, departures=(record["id"],))
    assert discard_left_scope(store, record["id"]) == []
    assert store.cache.get(record["id"]) is None
    assert release_all_editing(store) == set()
