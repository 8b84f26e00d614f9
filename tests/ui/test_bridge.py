"""The bridge turns core events into Qt signals, one per kind."""

from __future__ import annotations

import dataclasses

from app.events import (
    AuthRequired,
    ConflictRaised,
    ConnectivityChanged,
    EventBus,
    JobStateChanged,
    OpChanges,
    QueueChanged,
    RecordsChanged,
    SyncProgress,
)
from app.states import RETRYING
from ui.bridge import Bridge
from ui.qt import QObject, Signal, connect


def test_each_event_becomes_its_signal(qtbot, bus: EventBus) -> None:
    bridge = Bridge()
    bridge.attach(bus)
    with qtbot.wait_signal(bridge.queueChanged) as blocker:
        bus.publish(QueueChanged({"pending": 2}, 3.5))
    assert blocker.args == [{"pending": 2}, 3.5]
    with qtbot.wait_signal(bridge.jobStateChanged) as blocker:
        bus.publish(JobStateChanged(7, "e1", RETRYING, "timeout", 12.0))
    assert blocker.args == [7, "e1", "retrying", "timeout", 12.0]
    with qtbot.wait_signal(bridge.recordsChanged) as blocker:
        bus.publish(RecordsChanged(frozenset({"b", "a"})))
    assert blocker.args == [["a", "b"]]
    with qtbot.wait_signal(bridge.connectivityChanged) as blocker:
        bus.publish(ConnectivityChanged("offline", "no route"))
    assert blocker.args == ["offline", "no route"]
    with qtbot.wait_signal(bridge.conflictRaised) as blocker:
        bus.publish(ConflictRaised("e1", 7, "version"))
    assert blocker.args == ["e1", 7, "version"]
    with qtbot.wait_signal(bridge.syncProgress) as blocker:
        bus.publish(SyncProgress(3, 10, "flush"))
    assert blocker.args == [3, 10, "flush"]
    with qtbot.wait_signal(bridge.authRequired) as blocker:
        bus.publish(AuthRequired("http://x", "token revoked"))
    assert blocker.args == ["http://x", "token revoked"]


def test_detached_bridge_is_silent(qtbot, bus: EventBus) -> None:
    bridge = Bridge()
    bridge.attach(bus)
    bridge.detach()
    with qtbot.assert_not_emitted(bridge.queueChanged):
        bus.publish(QueueChanged({}, None))


def test_connect_refuses_what_is_not_a_slot(qapp) -> None:
    class Source(QObject):
        fired = Signal()

    source = Source()
    try:
        connect(source.fired, "not callable")  # type: ignore[arg-type]
    except TypeError:
        pass
    else:
        raise AssertionError("connect accepted a non-callable")


def test_missing_numbers_arrive_as_nan_many_times_over(qtbot, bus: EventBus) -> None:
    """None never crosses a signal (a PySide6 refcount bug aborted a 10,000-edit drain)."""
    import math

    bridge = Bridge()
    bridge.attach(bus)
    received: list[float] = []
    connect(bridge.jobStateChanged, lambda *args: received.append(args[4]))
    for job_id in range(20_000):
        bus.publish(JobStateChanged(job_id, "e1", "leased"))
    assert len(received) == 20_000
    assert all(math.isnan(value) for value in received)
    with qtbot.wait_signal(bridge.queueChanged) as blocker:
        bus.publish(QueueChanged({}, None))
    assert math.isnan(blocker.args[1])


def test_a_batch_of_job_states_is_one_signal_and_each_job_still_its_own(
    qtbot, bus: EventBus
) -> None:
    import math

    from app.events import JobStatesChanged, LastSyncChanged

    bridge = Bridge()
    bridge.attach(bus)
    singles: list[tuple[int, str, str, str, float]] = []
    connect(bridge.jobStateChanged, lambda *args: singles.append(args))
    batch = JobStatesChanged(
        (
            JobStateChanged(1, "e1", "done"),
            JobStateChanged(2, "e2", "retrying", "server busy (503)", 1_700_000_060.0),
        )
    )
    with qtbot.wait_signal(bridge.jobStatesChanged) as blocker:
        bus.publish(batch)
    [changes] = blocker.args
    assert [(c["job_id"], c["entity_id"], c["status"], c["error"]) for c in changes] == [
        (1, "e1", "done", ""),
        (2, "e2", "retrying", "server busy (503)"),
    ]
    assert math.isnan(changes[0]["next_attempt_at"])
    assert changes[1]["next_attempt_at"] == 1_700_000_060.0
    assert [s[:3] for s in singles] == [(1, "e1", "done"), (2, "e2", "retrying")]
    with qtbot.wait_signal(bridge.lastSyncChanged) as blocker:
        bus.publish(LastSyncChanged(1_700_000_000.5))
    assert blocker.args == [1_700_000_000.5]


def test_an_operations_changes_cross_the_bridge_whole(qtbot, bus: EventBus) -> None:
    bridge = Bridge()
    bridge.attach(bus)
    with qtbot.wait_signal(bridge.opChanges) as blocker:
        bus.publish(
            OpChanges(
                frozenset({"w2", "w1"}),
                queue=True,
                attachments=True,
                initiator="dead-letters",
            )
        )
    assert blocker.args == [
        {
            "entity_ids": ["w1", "w2"],
            "queue": True,
            "conflicts": False,
            "settings": False,
            "attachments": True,
            "initiator": "dead-letters",
        }
    ]
    # Every field of OpChanges, none dropped on the way.
    assert set(blocker.args[0]) == {field.name for field in dataclasses.fields(OpChanges)}
