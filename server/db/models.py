"""Peewee table definitions for the server database, bound per database by `bind_models`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar, cast

import peewee as pw

__all__ = [
    "BIGINT_MAX",
    "INTEGER_MAX",
    "Attachment",
    "ChangeCounter",
    "Conflict",
    "ConflictAudit",
    "Device",
    "DeviceStatus",
    "HeldRecord",
    "IdempotencyKey",
    "Pin",
    "RateBucket",
    "SchemaStep",
    "ScopeEntry",
    "Tables",
    "Upload",
    "WorkOrderChange",
    "WorkOrderRow",
    "bind_models",
]


#: The largest values the integer columns hold on every backend. A bigger number sent by a client
#: must be refused before it reaches a query: SQLite's driver raises OverflowError beyond
#: BIGINT_MAX, and PostgreSQL refuses to store beyond INTEGER_MAX in an IntegerField (int4).
BIGINT_MAX = 2**63 - 1  # SQLite INTEGER, PostgreSQL BIGINT: ids, sequence numbers
INTEGER_MAX = 2**31 - 1  # PostgreSQL INTEGER: versions


class _Base(pw.Model):
    class Meta:
        legacy_table_names = False


class Device(_Base):
    """A provisioned client (phone, laptop) or an admin; tokens are stored as sha256 only."""

    id = pw.AutoField()
    name = pw.CharField(max_length=100, unique=True)
    role = pw.CharField(max_length=16)
    token_hash = pw.CharField(max_length=64, unique=True)
    created_at = pw.CharField(max_length=40)
    revoked_at = pw.CharField(max_length=40, null=True)
    #: The person using the device (a work order's `assignee`); several devices may share one.
    user_name = pw.CharField(max_length=200, default="")
    team = pw.CharField(max_length=100, default="")
    #: A worker from before scopes: its feed is everything until `set-device` (scope/legacy.py).
    legacy_scope = pw.BooleanField(default=False)
    #: While that ends, batch by batch: the last work order id done ("" before the first). Its
    #: feed is its scope then, but it still reaches everything; None once ended (or never).
    legacy_ending_after = pw.CharField(max_length=36, null=True)
    #: The highest `since` it pulled the feed from: it holds every change up to there.
    feed_position = pw.BigIntegerField(default=0)
    #: The store it last wrote or pulled from (`Fieldsync-Install`, server/scope/echoes.py),
    #: and the change number below which that install wrote nothing.
    install_id = pw.CharField(max_length=64, default="")
    install_floor = pw.BigIntegerField(default=0)


class DeviceStatus(_Base):
    """What the server saw of a device and what the device last said of itself.

    `last_seen_at` and `last_sync_at` are the server's own observations (epoch seconds); the
    counts come from the `Fieldsync-Device-Status` header a device sends with its pull
    (server/devices/status.py) and are None until it sent one."""

    device_id = pw.IntegerField(primary_key=True)
    last_seen_at = pw.DoubleField(null=True)
    #: The end of its last complete pull of the changes feed.
    last_sync_at = pw.DoubleField(null=True)
    reported_at = pw.DoubleField(null=True)
    app_version = pw.CharField(max_length=64, default="")
    edits_waiting = pw.IntegerField(null=True)
    #: When its oldest waiting edit was made (the age it reported, counted back).
    oldest_edit_since = pw.DoubleField(null=True)
    failed_changes = pw.IntegerField(null=True)
    uploads_waiting = pw.IntegerField(null=True)
    #: The failed changes it listed: JSON `[{"entity_id", "title", "code", "reason", "since"}]`.
    failed = pw.TextField(default="[]")


class WorkOrderRow(_Base):
    """The current state of one work order; `seq` is the change-feed position of its last change."""

    id = pw.CharField(max_length=36, primary_key=True)
    title = pw.CharField(max_length=200)
    site = pw.CharField(max_length=200)
    status = pw.CharField(max_length=16)
    priority = pw.CharField(max_length=16)
    notes = pw.TextField()
    assignee = pw.CharField(max_length=200)
    team = pw.CharField(max_length=100, default="")
    due_date = pw.CharField(max_length=10, null=True)
    deleted = pw.BooleanField()
    version = pw.IntegerField()
    updated_at = pw.CharField(max_length=40)
    updated_by = pw.CharField(max_length=100)
    seq = pw.BigIntegerField(unique=True)
    #: The user of the device that created it ("" for work orders older than the field).
    created_by = pw.CharField(max_length=200, default="")

    class Meta:
        table_name = "work_order"


class WorkOrderChange(_Base):
    """One applied change of a work order (server/records/history.py): its new version, when,
    who (`actor`, the person; `device` and `device_id` when it came from one), the way in
    (`source`: device, console or conflict), `kind` (create, update, delete) and `fields`,
    JSON `{name: [before, after]}`."""

    id = pw.AutoField()
    entity_id = pw.CharField(max_length=36)
    version = pw.IntegerField()
    at = pw.CharField(max_length=40, index=True)
    device_id = pw.IntegerField(null=True)
    device = pw.CharField(max_length=100, default="")
    actor = pw.CharField(max_length=200)
    source = pw.CharField(max_length=16)
    kind = pw.CharField(max_length=16)
    fields = pw.TextField()

    class Meta:
        table_name = "work_order_change"
        indexes = ((("entity_id", "version"), False),)


class ChangeCounter(_Base):
    """Single-row counter handing out change sequence numbers inside write transactions."""

    name = pw.CharField(max_length=32, primary_key=True)
    value = pw.BigIntegerField()


class IdempotencyKey(_Base):
    """One (device, key): a `processing` claim, then the stored response of its single effect."""

    id = pw.AutoField()
    device_id = pw.IntegerField()
    key = pw.CharField(max_length=255)
    request_hash = pw.CharField(max_length=64)
    state = pw.CharField(max_length=16)
    claim_token = pw.CharField(max_length=32)
    claimed_at = pw.DoubleField()
    created_at = pw.DoubleField(index=True)
    status_code = pw.IntegerField(null=True)
    response_body = pw.TextField(null=True)

    class Meta:
        indexes = ((("device_id", "key"), True),)


class Conflict(_Base):
    """A change a field worker sent for review instead of settling it alone."""

    id = pw.AutoField()
    entity_id = pw.CharField(max_length=36, index=True)
    base_version = pw.IntegerField(null=True)
    mine = pw.TextField()
    server = pw.TextField()
    #: The values the worker's edit started from (JSON; None from devices that do not send it).
    base = pw.TextField(null=True)
    note = pw.TextField(null=True)
    device_id = pw.IntegerField(index=True)
    device = pw.CharField(max_length=100)
    status = pw.CharField(max_length=16, index=True)
    created_at = pw.CharField(max_length=40)
    decided_by = pw.CharField(max_length=100, null=True)
    decided_at = pw.CharField(max_length=40, null=True)
    resolution = pw.TextField(null=True)


class ConflictAudit(_Base):
    """Append-only log of review decisions: who, when, which values."""

    id = pw.AutoField()
    conflict_id = pw.IntegerField(index=True)
    action = pw.CharField(max_length=16)
    actor = pw.CharField(max_length=100)
    at = pw.CharField(max_length=40)
    chosen = pw.TextField()


class Upload(_Base):
    """One tus upload: a device's file on its way, named by the device's `attachment_id`."""

    id = pw.CharField(max_length=32, primary_key=True)
    device_id = pw.IntegerField()
    attachment_id = pw.CharField(max_length=36, unique=True)
    entity_id = pw.CharField(max_length=36)
    filename = pw.CharField(max_length=255)
    content_type = pw.CharField(max_length=255)
    sha256 = pw.CharField(max_length=64)
    length = pw.BigIntegerField()
    offset = pw.BigIntegerField()
    #: Epoch seconds; an unfinished upload idle this long is pruned with its partial file.
    expires_at = pw.DoubleField(index=True)
    complete = pw.BooleanField()

    class Meta:
        indexes = ((("device_id", "attachment_id"), True),)


class Attachment(_Base):
    """A file that belongs to a work order; `seq` is its place in the changes feed."""

    id = pw.CharField(max_length=36, primary_key=True)
    entity_id = pw.CharField(max_length=36, index=True)
    filename = pw.CharField(max_length=255)
    content_type = pw.CharField(max_length=255)
    size = pw.BigIntegerField()
    sha256 = pw.CharField(max_length=64, index=True)
    created_at = pw.CharField(max_length=40)
    created_by = pw.CharField(max_length=100)
    deleted = pw.BooleanField()
    deleted_at = pw.CharField(max_length=40, null=True)
    deleted_by = pw.CharField(max_length=100, null=True)
    seq = pw.BigIntegerField(unique=True)


class ScopeEntry(_Base):
    """Where a work order stands in one scope key's change feed (see server/scope/feed.py).

    One row per (key, work order) that ever met: `seq` is the last change number that touched
    the pair, `present` whether the work order is in the key now. Keys are `u:<user>`
    (assignee or creator), `t:<team>`, `p:<user>` (pinned) and `d:<device id>` (stamps of a
    device whose own scope changed). The feed reads `(key, seq)` ranges from an index that
    also holds `entity_id`, so a page reads a few index pages of its keys and never the
    table's rows, scattered as they are over all work orders; writes find a work order's keys
    by `entity_id`. Absent rows go once no feed page needs them (server/scope/prune.py).
    """

    key = pw.CharField(max_length=210)
    #: A work order's id, or `f:` + an attachment's (its own changes, under its work order's
    #: keys; a key space of its own, server/scope/keys.py `FILE`).
    entity_id = pw.CharField(max_length=38)
    seq = pw.BigIntegerField()
    present = pw.BooleanField()

    class Meta:
        primary_key = pw.CompositeKey("key", "entity_id")
        indexes = ((("key", "seq", "entity_id"), False), (("entity_id",), False))


class HeldRecord(_Base):
    """The newest version of a work order the server sent one device (server/scope/held.py): what
    lets an edit made while it was in the device's scope through after it left."""

    device_id = pw.IntegerField()
    entity_id = pw.CharField(max_length=36)
    version = pw.IntegerField()

    class Meta:
        primary_key = pw.CompositeKey("device_id", "entity_id")


class Pin(_Base):
    """A work order a person keeps offline on all their devices ("Keep offline")."""

    user_name = pw.CharField(max_length=200)
    entity_id = pw.CharField(max_length=36)
    pinned_at = pw.CharField(max_length=40)

    class Meta:
        primary_key = pw.CompositeKey("user_name", "entity_id")


class RateBucket(_Base):
    """One device's token bucket, shared by every server process on the database."""

    device_id = pw.IntegerField(primary_key=True)
    tokens = pw.DoubleField()
    updated = pw.DoubleField()
    allowed = pw.BooleanField(default=True)


class SchemaStep(_Base):
    """The schema steps (server/db/schema.py) applied to this database."""

    step = pw.IntegerField(primary_key=True)
    applied_at = pw.CharField(max_length=40)


M = TypeVar("M", bound=pw.Model)


def _bound(model: type[M], database: pw.Database) -> type[M]:
    # Subclassing per database (instead of Model.bind, which is global) lets one process run
    # several servers on different databases: tests, the benchmark, the app's embedded server.
    meta = type("Meta", (), {"database": database, "table_name": model._meta.table_name})
    namespace: dict[str, Any] = {"Meta": meta, "__module__": __name__}
    return cast(type[M], type(model.__name__, (model,), namespace))


@dataclass(frozen=True)
class Tables:
    """The model classes bound to one database."""

    Device: type[Device]
    DeviceStatus: type[DeviceStatus]
    WorkOrder: type[WorkOrderRow]
    WorkOrderChange: type[WorkOrderChange]
    ChangeCounter: type[ChangeCounter]
    IdempotencyKey: type[IdempotencyKey]
    Conflict: type[Conflict]
    ConflictAudit: type[ConflictAudit]
    Upload: type[Upload]
    Attachment: type[Attachment]

    ScopeEntry: type[ScopeEntry]
    HeldRecord: type[HeldRecord]
    Pin: type[Pin]
    RateBucket: type[RateBucket]
    SchemaStep: type[SchemaStep]

    def all(self) -> list[type[pw.Model]]:
        return [
            self.Device,
            self.DeviceStatus,
            self.WorkOrder,
            self.WorkOrderChange,
            self.ChangeCounter,
            self.IdempotencyKey,
            self.Conflict,
            self.ConflictAudit,
            self.Upload,
            self.Attachment,
            self.ScopeEntry,
            self.HeldRecord,
            self.Pin,
            self.RateBucket,
            self.SchemaStep,
        ]


def bind_models(database: pw.Database) -> Tables:
    return Tables(
        Device=_bound(Device, database),
        DeviceStatus=_bound(DeviceStatus, database),
        WorkOrder=_bound(WorkOrderRow, database),
        WorkOrderChange=_bound(WorkOrderChange, database),
        ChangeCounter=_bound(ChangeCounter, database),
        IdempotencyKey=_bound(IdempotencyKey, database),
        Conflict=_bound(Conflict, database),
        ConflictAudit=_bound(ConflictAudit, database),
        Upload=_bound(Upload, database),
        Attachment=_bound(Attachment, database),
        ScopeEntry=_bound(ScopeEntry, database),
        HeldRecord=_bound(HeldRecord, database),
        Pin=_bound(Pin, database),
        RateBucket=_bound(RateBucket, database),
        SchemaStep=_bound(SchemaStep, database),
    )
