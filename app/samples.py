"""Sample work orders for a first run, so a newcomer can try every page within a minute.

`make run` starts the app beside an embedded server; on that server's first run the app adds
a handful of work orders for this device's person and team (`add_samples`): one with a photo,
one overdue, one done, one to edit. They are ordinary work orders, saved here and synced like
any other, marked by their title ("Sample: …") and by the list of their ids kept in the
settings, and they all go in one step (`remove_samples`: each deleted, on the server too).
`fieldsync-gui --no-samples` skips them.
"""

from __future__ import annotations

import datetime
import json
import struct
import tempfile
import zlib
from pathlib import Path
from typing import Any

from app.attachments.store import Attachments
from app.store.db import WriteTransaction
from app.store.errors import storage_errors
from app.store.settings import read_setting, write_setting

__all__ = ["SAMPLES_KEY", "SAMPLE_PREFIX", "add_samples", "remove_samples", "sample_ids"]

#: The settings key: the ids of the samples still on the device (JSON list).
SAMPLES_KEY = "samples"
#: Every sample's title starts with it.
SAMPLE_PREFIX = "Sample: "


def _samples(person: str, team: str, today: datetime.date) -> list[dict[str, Any]]:
    mine = {"assignee": person, "team": team}
    return [
        {
            "title": f"{SAMPLE_PREFIX}Replace the pump seal",
            "site": "Pump house 2",
            "priority": "high",
            "due_date": (today + datetime.timedelta(days=2)).isoformat(),
            "notes": "A sample with a photo of the old seal: open it to see the photo.",
            **mine,
        },
        {
            "title": f"{SAMPLE_PREFIX}Inspect the gate 4 valve",
            "site": "North yard",
            "due_date": (today - datetime.timedelta(days=3)).isoformat(),
            "notes": "A sample that is overdue: its due date has passed.",
            **mine,
        },
        {
            "title": f"{SAMPLE_PREFIX}Read the depot 3 meters",
            "site": "Depot 3",
            "status": "done",
            "priority": "low",
            "notes": "A sample that is done.",
            **mine,
        },
        {
            "title": f"{SAMPLE_PREFIX}Check the boiler pressure",
            "site": "Main building",
            "status": "in_progress",
            "notes": "A sample to edit: change a field and Save, then watch it sync.",
            **mine,
        },
    ]


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A plain PNG of one colour (the sample's photo), from the standard library alone."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\x00" + bytes(rgb) * width
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"".join(
        [
            b"\x89PNG\r\n\x1a\n",
            chunk(b"IHDR", header),
            chunk(b"IDAT", zlib.compress(row * height)),
            chunk(b"IEND", b""),
        ]
    )


def add_samples(
    store: Any, person: str, team: str = "", today: datetime.date | None = None
) -> list[str]:
    """Create the samples (once: none if they were ever added); their ids."""
    with storage_errors(store.path):
        if read_setting(store, SAMPLES_KEY) is not None:
            return []
    records = _samples(person, team, today or datetime.date.today())
    with WriteTransaction(store.db, store.path):
        ids: list[str] = store.import_records(records)
        write_setting(store, SAMPLES_KEY, json.dumps(ids))
    with tempfile.TemporaryDirectory() as folder:
        photo = Path(folder) / "old-pump-seal.png"
        photo.write_bytes(_png(320, 240, (70, 110, 150)))
        Attachments(store).attach(ids[0], photo)
    return ids


def sample_ids(store: Any) -> list[str]:
    """The samples still on the device."""
    with storage_errors(store.path):
        text = read_setting(store, SAMPLES_KEY)
    ids = json.loads(text) if text else []
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = store.read(f"SELECT id FROM work_orders WHERE deleted = 0 AND id IN ({marks})", ids)
    present = {row[0] for row in rows}
    return [entity_id for entity_id in ids if entity_id in present]


def remove_samples(store: Any) -> list[str]:
    """Delete every sample still here (queued, so the server drops them too); their ids."""
    ids = sample_ids(store)
    with WriteTransaction(store.db, store.path):
        for entity_id in ids:
            store.record_edit("delete", entity_id)
        write_setting(store, SAMPLES_KEY, "[]")
    return ids
