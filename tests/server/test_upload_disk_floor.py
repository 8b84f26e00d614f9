"""The free-disk floor on a real small filesystem (a tmpfs of 24 MiB mounted for the test):
uploads fill it up to the floor and are then refused with 507, a PATCH stops writing at the
floor and keeps what it wrote, and edits still succeed on the database beside the files."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.embedded import EmbeddedServer, start_server
from tests.support.api import ServerApi
from tests.support.tus import TUS, create_upload, file_metadata, patch

MIB = 1024 * 1024
FLOOR = 4 * MIB


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB filesystem of its own (the tests run as root, as `make test` does here)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=True)


@pytest.fixture
def full_server(small_disk: Path) -> Iterator[EmbeddedServer]:
    with start_server(
        f"sqlite:///{small_disk / 'server.sqlite3'}",
        rate_limit_per_second=0,
        min_free_disk_bytes=FLOOR,
        device_unfinished_bytes=64 * MIB,
        user_stored_bytes=64 * MIB,
    ) as running:
        yield running


def free(path: Path) -> int:
    return shutil.disk_usage(path).free


def test_uploads_fill_the_disk_to_the_floor_and_edits_still_succeed(
    full_server: EmbeddedServer, small_disk: Path
) -> None:
    api = ServerApi(full_server.base_url, full_server.add_device("phone-1", "worker"))
    try:
        record = api.create()
        statuses: list[int] = []
        while not statuses or statuses[-1] != 507:
            data = os.urandom(3 * MIB)
            created = create_upload(api.client, len(data), file_metadata(record["id"], data))
            statuses.append(created.status_code)
            if created.status_code == 201:
                done = patch(api.client, created.headers["Location"], 0, data)
                statuses.append(done.status_code)
            assert len(statuses) < 40, statuses
        assert set(statuses) == {201, 204, 507}
        assert created.json() == {
            "error": "insufficient_storage",
            "detail": "the server keeps 4.0 MiB of disk free for edits; uploads wait until"
            " there is room",
        }
        assert FLOOR <= free(small_disk) < FLOOR + 3 * MIB  # filled, up to the floor
        # The work goes on: single edits and a batch, on the database beside the files.
        current = api.client.get(f"/v1/records/{record['id']}").json()["record"]
        edited = api.update(record["id"], current["version"], title="Pump 4 after the disk filled")
        assert edited.status_code == 200, edited.text
        for number in range(20):
            api.create(title=f"work order {number} on a full disk")
        assert api.client.get(f"/v1/records/{record['id']}").json()["record"]["title"] == (
            "Pump 4 after the disk filled"
        )
    finally:
        api.close()


def test_a_patch_stops_at_the_floor_and_keeps_what_it_wrote(
    full_server: EmbeddedServer, small_disk: Path
) -> None:
    """Two uploads each fit when created, not both: the second's PATCH writes up to the floor
    and answers 507 with the offset it kept, and goes on once there is room again."""
    api = ServerApi(full_server.base_url, full_server.add_device("phone-1", "worker"))
    try:
        record = api.create()
        room = free(small_disk) - FLOOR
        first, second = os.urandom(room * 2 // 3), os.urandom(room * 2 // 3)
        one = create_upload(api.client, len(first), file_metadata(record["id"], first))
        two = create_upload(api.client, len(second), file_metadata(record["id"], second))
        assert (one.status_code, two.status_code) == (201, 201)
        assert patch(api.client, one.headers["Location"], 0, first).status_code == 204
        stopped = patch(api.client, two.headers["Location"], 0, second)
        assert stopped.status_code == 507
        assert stopped.json()["error"] == "insufficient_storage"
        kept = int(stopped.headers["Upload-Offset"])
        assert 0 < kept < len(second)
        # Up to the floor; the database's own writes may use the floor: it is kept for them.
        assert free(small_disk) >= FLOOR - 64 * 1024
        head = api.client.head(two.headers["Location"], headers=TUS)
        assert head.headers["Upload-Offset"] == str(kept)
        # At the floor, a PATCH is refused before its body is read.
        again = patch(api.client, two.headers["Location"], kept, second[kept:])
        assert again.status_code == 507
        assert again.headers["Connection"] == "close"
        # Room again (an admin removed something): the upload goes on from what it kept.
        attachment = api.client.get(f"/v1/records/{record['id']}").json()["record"]["attachments"][
            0
        ]
        blob = small_disk / "attachments" / "sha256" / attachment["sha256"][:2]
        shutil.rmtree(blob)
        rest = patch(api.client, two.headers["Location"], kept, second[kept:])
        assert rest.status_code == 204, rest.text
    finally:
        api.close()
