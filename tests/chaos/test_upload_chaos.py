"""Attachments under chaos: uploads cut mid-body, the last chunk's reply lost, the device
SIGKILLed mid-upload, the server SIGKILLed mid-PATCH. Afterwards every attachment exists exactly
once with the right bytes, nothing is stranded, and each interruption re-sent at most a chunk.

The device is `upload_runner.py` (the real store, queue and engine; 256 KiB chunks) behind the
fault proxy, whose records say what the device sent (the request's Upload-Offset and the body
bytes that arrived), so the bytes re-sent are measured on the wire, not taken from the device.
"""

from __future__ import annotations

import base64
import hashlib
import random
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.chaos import plans as faults
from tests.chaos.helpers import add_device, record_figures
from tests.chaos.plans import PASS, Fault, RequestInfo
from tests.chaos.proxy import FaultProxy
from tests.chaos.restarts import Restarts
from tests.chaos.uploads import (
    CHUNK,
    SIZES,
    Resent,
    UploadDevice,
    attach_files,
    audit_uploads,
    make_files,
    resent_bytes,
)
from tests.support.postgres import PostgresCluster
from tests.support.serve import ServerProcess

UPLOADS = "/v1/uploads/"


def _upstream(server: ServerProcess) -> tuple[str, int]:
    parts = urlsplit(server.base_url)
    return parts.hostname or "127.0.0.1", parts.port or 80


def _check_resent(resent: Resent, interruptions: int) -> None:
    """At most one chunk per interruption, and no resume the faults did not cause."""
    assert resent.total == sum(resent.overlaps), str(resent)
    assert len(resent.overlaps) <= interruptions, str(resent)
    assert all(0 <= overlap <= CHUNK for overlap in resent.overlaps), str(resent)


def _figures(name: str, seed: int, resent: Resent, problems: list[str], **more: object) -> None:
    record_figures(
        name,
        {
            "seed": seed,
            "attachments_audited": len(SIZES),
            "audit_problems": len(problems),
            "files": len(SIZES),
            "bytes": sum(SIZES),
            "chunk_bytes": CHUNK,
            "patch_requests": resent.patches,
            "bytes_resent": resent.total,
            "resumes_that_resent": len(resent.overlaps),
            "largest_resend_bytes": max(resent.overlaps, default=0),
            **more,
        },
        base="chaos-uploads",
    )


# -- the server alone: a cut PATCH keeps what arrived ------------------------------------------


def _metadata(**values: str) -> str:
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in values.items())


def test_a_patch_cut_mid_body_keeps_what_arrived_unless_its_checksum_cannot_match(
    server_process: ServerProcess, proxy: FaultProxy
) -> None:
    token = add_device(server_process.db_url, "camera")
    tus = {"Authorization": f"Bearer {token}", "Tus-Resumable": "1.0.0"}
    data = random.Random(5).randbytes(3 * CHUNK)
    entity_id = str(uuid.uuid4())
    with httpx.Client(base_url=server_process.base_url, headers=tus, timeout=10) as direct:
        create = {"entity_id": entity_id, "op": "create", "base_version": None,
                  "fields": {"title": "Cut uploads"}}  # fmt: skip
        made = direct.post("/v1/mutations", json=create, headers={"Idempotency-Key": "k1"})
        assert made.status_code == 201, made.text
        meta = _metadata(attachment_id=str(uuid.uuid4()), entity_id=entity_id,
                         filename="cut.jpg", content_type="image/jpeg",
                         sha256=hashlib.sha256(data).hexdigest())  # fmt: skip
        posted = direct.post(
            "/v1/uploads", headers={"Upload-Length": str(len(data)), "Upload-Metadata": meta}
        )
        assert posted.status_code == 201, posted.text
        location = posted.headers["Location"]

        def offset() -> int:
            return int(direct.head(location).headers["Upload-Offset"])

        patch = {"Content-Type": "application/offset+octet-stream"}
        proxy.set_plan(faults.ScriptedPlan([faults.cut_body(100_000)] * 2, paths=UPLOADS))
        with httpx.Client(base_url=proxy.base_url, headers=tus, timeout=10) as via:
            with pytest.raises(httpx.TransportError):
                via.patch(location, content=data[:CHUNK], headers={**patch, "Upload-Offset": "0"})
            # Every byte that reached the server is kept (once it has finished the request:
            # on a loaded machine that can come after the client saw its reset).
            deadline = time.monotonic() + 20
            while offset() != 100_000 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert offset() == 100_000
            chunk = data[100_000 : 100_000 + CHUNK]
            digest = base64.b64encode(hashlib.sha256(chunk).digest()).decode()
            checked = {**patch, "Upload-Offset": "100000", "Upload-Checksum": f"sha256 {digest}"}
            with pytest.raises(httpx.TransportError):
                via.patch(location, content=chunk, headers=checked)
        # A cut chunk cannot match its checksum: none of it is kept, so the rest goes from
        # 100,000 (423 while the server still finishes the cut request).
        for _ in range(100):
            rest = direct.patch(
                location, content=data[100_000:], headers={**patch, "Upload-Offset": "100000"}
            )
            if rest.status_code != 423:
                break
            time.sleep(0.1)
        assert rest.status_code == 204, rest.text
        got = direct.get(f"/v1/records/{entity_id}").json()["record"]["attachments"]
        assert [a["sha256"] for a in got] == [hashlib.sha256(data).hexdigest()]
        assert direct.get(f"/v1/attachments/{got[0]['id']}").content == data


# -- the device through the proxy ---------------------------------------------------------------


class CutsAndLostReplies:
    """Cuts every third PATCH at a seeded point of its body (up to `cuts`), and drops the reply
    of the last PATCH of each file once (the server has the whole file; the device does not
    know)."""

    def __init__(self, rng: random.Random, cuts: int) -> None:
        self.rng = rng
        self.cuts_left = cuts
        self.patches = 0
        self.cut = 0
        self.dropped: set[int] = set()

    def __call__(self, info: RequestInfo) -> Fault:
        if info.method != "PATCH":
            return PASS
        self.patches += 1
        end = int(info.header("upload-offset") or 0) + info.body_bytes
        if end in SIZES and end not in self.dropped:
            self.dropped.add(end)
            return faults.drop_response()
        if self.patches % 3 == 0 and self.cuts_left > 0 and info.body_bytes > 1:
            self.cuts_left -= 1
            self.cut += 1
            return faults.cut_body(self.rng.randrange(1, info.body_bytes))
        return PASS


def _device(tmp_path: Path, db_url: str, seed: int) -> tuple[UploadDevice, list, str]:
    token = add_device(db_url, "camera-phone")
    device = UploadDevice(tmp_path / "devices", token, seed)
    attached = attach_files(device.data_dir, make_files(tmp_path / "files", random.Random(seed)))
    return device, attached, token


def test_cuts_and_lost_last_replies_resend_at_most_a_chunk_each(
    tmp_path: Path, server_process: ServerProcess, proxy: FaultProxy, chaos_seed: int
) -> None:
    plan = CutsAndLostReplies(random.Random(chaos_seed), cuts=4)
    proxy.set_plan(plan)
    device, attached, token = _device(tmp_path, server_process.db_url, chaos_seed)
    device.start(proxy.base_url)
    assert device.wait(90) == 0, device.output()
    resent = resent_bytes(proxy.snapshot(), SIZES)
    problems = audit_uploads(server_process.db_url, server_process.base_url, token,
                             device.data_dir, attached)  # fmt: skip
    _figures("upload_cuts_and_lost_replies", chaos_seed, resent, problems, cuts=plan.cut,
             lost_last_replies=len(plan.dropped))  # fmt: skip
    assert problems == [], problems
    assert plan.cut == 4
    assert len(plan.dropped) == len(SIZES)
    _check_resent(resent, plan.cut + len(plan.dropped))


class PatchSeen:
    """Passes everything; tells the test when a PATCH's head arrived (its body on the way)."""

    def __init__(self) -> None:
        self.seen = threading.Event()

    def __call__(self, info: RequestInfo) -> Fault:
        if info.method == "PATCH":
            self.seen.set()
        return PASS


def _kill_during_patches(seen: PatchSeen, kills: int, kill: object, rng: random.Random) -> int:
    """`kills` times: wait for a PATCH, let it run a seeded moment (0-5 ms), call `kill`.
    Returns how many kills came while a PATCH was on its way."""
    during = 0
    for _ in range(kills):
        seen.seen.clear()
        if seen.seen.wait(20.0):
            during += 1
            time.sleep(rng.uniform(0.0, 0.005))
        kill()  # type: ignore[operator]
    return during


def test_the_device_sigkilled_mid_upload_resumes_from_the_server(
    tmp_path: Path, server_process: ServerProcess, proxy: FaultProxy, chaos_seed: int
) -> None:
    rng = random.Random(chaos_seed)
    seen = PatchSeen()
    proxy.set_plan(seen)
    device, attached, token = _device(tmp_path, server_process.db_url, chaos_seed)
    device.start(proxy.base_url)

    def kill_and_restart() -> None:
        assert device.kill(), f"the runner ended before it was killed:\n{device.output()}"
        device.start(proxy.base_url)

    during = _kill_during_patches(seen, 3, kill_and_restart, rng)
    assert device.wait(90) == 0, device.output()
    records = proxy.snapshot()
    resent = resent_bytes(records, SIZES)
    problems = audit_uploads(server_process.db_url, server_process.base_url, token,
                             device.data_dir, attached)  # fmt: skip
    gone = sum(1 for r in records if r.fault == "client_gone")
    _figures("upload_device_kills", chaos_seed, resent, problems, device_kills=3,
             kills_during_a_patch=during, patches_cut_by_the_kill=gone)  # fmt: skip
    assert problems == [], problems
    assert during == 3
    _check_resent(resent, 3)


@dataclass(frozen=True)
class UploadServers:
    """Where the server-kill test's servers keep their data: a SQLite file with its files
    beside it (one process, restarted), or PostgreSQL with two processes sharing one
    attachments directory (a kill moves the device to the other process)."""

    backend: str
    db_url: str
    attachments_dir: Path

    def start(self, proxy: FaultProxy) -> Restarts:
        if self.backend == "sqlite":
            return Restarts(self.db_url, proxy)
        args = ("--attachments-dir", str(self.attachments_dir))
        return Restarts(self.db_url, proxy, *args, standby=True)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def upload_servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[UploadServers]:
    (tmp_path / "server").mkdir()
    if request.param == "sqlite":
        db_url = f"sqlite:///{tmp_path / 'server' / 'server.sqlite3'}"
        yield UploadServers("sqlite", db_url, tmp_path / "server" / "attachments")
        return
    # The session's cluster (tests/conftest.py), a database of this test's own.
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    db_url = cluster.create_database(f"uploads_{uuid.uuid4().hex[:12]}")
    yield UploadServers("postgresql", db_url, tmp_path / "server" / "shared-attachments")


def test_the_server_sigkilled_mid_patch_loses_at_most_the_chunk(
    tmp_path: Path, upload_servers: UploadServers, chaos_seed: int
) -> None:
    rng = random.Random(chaos_seed)
    db_url = upload_servers.db_url
    seen = PatchSeen()
    proxy = FaultProxy(("127.0.0.1", 9), seen)
    servers = upload_servers.start(proxy)
    proxy.set_upstream(servers.upstream())
    proxy.start()
    try:
        device, attached, token = _device(tmp_path, db_url, chaos_seed)
        device.start(proxy.base_url)
        during = _kill_during_patches(seen, 3, servers.kill_and_restart, rng)
        assert device.wait(90) == 0, device.output()
        records = proxy.snapshot()
        problems = audit_uploads(db_url, servers.current.base_url, token, device.data_dir,
                                 attached, upload_servers.attachments_dir)  # fmt: skip
    finally:
        proxy.stop()
        servers.stop()
    resent = resent_bytes(records, SIZES)
    name, more = "upload_server_kills", {}
    if upload_servers.backend != "sqlite":
        name = f"upload_server_kills_{upload_servers.backend}_two_processes"
        more = {"backend": upload_servers.backend, "server_processes": 2}
    _figures(name, chaos_seed, resent, problems, server_kills=servers.kills,
             kills_during_a_patch=during, **more)  # fmt: skip
    assert problems == [], problems
    assert servers.kills == 3
    assert during == 3
    _check_resent(resent, 3)
