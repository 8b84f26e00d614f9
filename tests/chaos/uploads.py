"""Shared by the upload chaos tests: files, a device with attachments, the runner process, the
bytes re-sent per interruption (from the proxy's records) and the audit afterwards.

The audit is the issue's promise, checked from both ends and the disk: every attachment the
device made exists on the server exactly once, with its size and sha256, and its bytes (read
back over HTTP) hash to it; the device holds nothing unconfirmed and no upload job that is not
done; the server holds no unfinished upload of them, no partial file, and one blob per content.
"""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from app.attachments import Attachments, AttachmentView
from app.states import AttachmentState
from app.store.store import Store
from server.db.store import open_store
from tests.chaos.helpers import REPO, Device
from tests.chaos.plans import RequestRecord

CHUNK = 256 * 1024
#: Three files, none a multiple of the chunk (so the last PATCH of each is told apart).
SIZES = (5 * CHUNK + 1234, 3 * CHUNK + 77, 7 * CHUNK + 4321)


def make_files(root: Path, rng: random.Random, sizes: tuple[int, ...] = SIZES) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    files = []
    for index, size in enumerate(sizes):
        path = root / f"photo-{index}.jpg"
        path.write_bytes(rng.randbytes(size))
        files.append(path)
    return files


def attach_files(data_dir: Path, files: list[Path]) -> list[AttachmentView]:
    """A work order made on the device and the files attached to it (durable on return); the
    runner delivers the create first, then the uploads."""
    with Store(data_dir) as store:
        entity_id = str(uuid.uuid4())
        store.record_edit("create", entity_id, {"title": "Photos under chaos"})
        attachments = Attachments(store)
        return [attachments.attach(entity_id, path) for path in files]


class UploadDevice(Device):
    """One `tests.chaos.upload_runner` process at a time for a data dir; SIGKILL and restart
    (the device of the many-devices run, with another program and no plan)."""

    def __init__(self, root: Path, token: str, seed: int) -> None:
        super().__init__("device", root, token, [], seed)

    def start(self, server: str, pace: float = 0.0, *extra: str) -> None:
        env = {**os.environ, "FIELDSYNC_TOKEN": self.token, "PYTHONPATH": str(REPO)}
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.chaos.upload_runner", "--data-dir",
                 str(self.data_dir), "--server", server, "--chunk", str(CHUNK),
                 "--seed", str(self.seed + self.starts), "--timeout", "90", *extra],
                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self.starts += 1


# -- bytes re-sent ---------------------------------------------------------------------------


@dataclass
class Resent:
    """PATCH bytes the device sent for ranges it had sent before, from the proxy's records:
    `total` (all PATCH body bytes minus the files' sizes) and each resume's overlap."""

    total: int
    overlaps: list[int] = field(default_factory=list)
    patches: int = 0
    #: (upload, Upload-Offset, body bytes, fault, status) per PATCH, for a failure's message.
    trace: list[tuple[str, int, int, str, int | None]] = field(default_factory=list, repr=False)

    def __str__(self) -> str:
        lines = [f"{self.total} B re-sent, overlaps {self.overlaps}, {self.patches} PATCHes:"]
        lines += [f"  {p[-8:]} @{o} +{n} {fault} -> {code}" for p, o, n, fault, code in self.trace]
        return "\n".join(lines)


def resent_bytes(records: list[RequestRecord], sizes: tuple[int, ...]) -> Resent:
    """A PATCH starting below the highest byte already sent to its upload re-sends the gap;
    each such resume is one overlap (a cut, a kill, a lost reply: one interruption)."""
    patches = [r for r in records if r.method == "PATCH"]
    highest: dict[str, int] = defaultdict(int)
    overlaps = []
    for record in patches:
        offset = int(record.header("upload-offset") or 0)
        if offset < highest[record.path]:
            # Re-sent: the part of this body below what was sent before (a resume that was
            # itself cut may stop short of it).
            overlaps.append(min(highest[record.path] - offset, record.body_bytes))
        highest[record.path] = max(highest[record.path], offset + record.body_bytes)
    sent = sum(r.body_bytes for r in patches)
    trace = [
        (r.path, int(r.header("upload-offset") or 0), r.body_bytes, r.fault, r.upstream_status)
        for r in patches
    ]
    return Resent(sent - sum(sizes), overlaps, len(patches), trace)


# -- the audit ---------------------------------------------------------------------------------


def audit_uploads(
    db_url: str,
    base_url: str,
    token: str,
    data_dir: Path,
    attached: list[AttachmentView],
    attachments_dir: Path | None = None,
) -> list[str]:
    """Everything wrong, in words (empty: the promise holds). ``attachments_dir``: the
    server's files (default: beside its SQLite database)."""
    problems: list[str] = []
    wanted = {view.id: view for view in attached}
    entity_ids = {view.entity_id for view in attached}
    with Store(data_dir) as device:
        attachments = Attachments(device)
        for view in attached:
            now = attachments.get(view.id)
            if now is None or now.state is not AttachmentState.UPLOADED:
                problems.append(f"device: {view.id} is {now and now.state}, not uploaded")
        open_jobs = device.db.execute_sql(
            "SELECT id, status, last_error FROM jobs WHERE status != 'done'"
        ).fetchall()
        problems += [f"device: job {job} is not done" for job in open_jobs]
    store = open_store(db_url)
    try:
        rows = list(
            store.tables.Attachment.select().where(store.tables.Attachment.entity_id << entity_ids)
        )
        uploads = list(
            store.tables.Upload.select().where(store.tables.Upload.attachment_id << list(wanted))
        )
    finally:
        store.close()
    seen = defaultdict(int)
    for row in rows:
        seen[row.id] += 1
        view = wanted.get(row.id)
        if view is None:
            problems.append(f"server: attachment {row.id} was never attached on the device")
        elif (row.size, row.sha256, row.deleted) != (view.size, view.sha256, False):
            problems.append(f"server: {row.id} is {row.size} B {row.sha256[:12]} {row.deleted}")
    for attachment_id in wanted:
        if seen[attachment_id] != 1:
            problems.append(f"server: {attachment_id} exists {seen[attachment_id]} times")
    by_attachment = defaultdict(list)
    for upload in uploads:
        by_attachment[upload.attachment_id].append(upload)
    for attachment_id in wanted:
        found = by_attachment[attachment_id]
        if len(found) != 1 or not found[0].complete:
            problems.append(f"server: uploads of {attachment_id}: {[u.complete for u in found]}")
    problems += _bytes_read_back(base_url, token, attached)
    if attachments_dir is None:
        attachments_dir = Path(db_url.removeprefix("sqlite:///")).parent / "attachments"
    problems += _disk(attachments_dir, attached)
    return problems


def _bytes_read_back(base_url: str, token: str, attached: list[AttachmentView]) -> list[str]:
    problems = []
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=30) as client:
        for view in attached:
            reply = client.get(f"/v1/attachments/{view.id}")
            digest = hashlib.sha256(reply.content).hexdigest()
            if reply.status_code != 200 or digest != view.sha256:
                problems.append(f"GET {view.id}: {reply.status_code}, sha256 {digest[:12]}")
    return problems


def _disk(root: Path, attached: list[AttachmentView]) -> list[str]:
    """No partial file left; exactly one blob per distinct content, named by its hash."""
    problems = []
    partial = sorted(p.name for p in (root / "partial").glob("*"))
    if partial:
        problems.append(f"disk: partial files left: {partial}")
    blobs = sorted(p.name for p in (root / "sha256").glob("*/*"))
    if blobs != sorted({view.sha256 for view in attached}):
        problems.append(f"disk: blobs {blobs}")
    return problems
