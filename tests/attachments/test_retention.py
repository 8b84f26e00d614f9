"""What the device keeps: unsent files always, confirmed ones for 30 days, all under a budget."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from app.attachments import AttachmentConfig, Attachments, StorageBudgetFull
from app.attachments.retention import Retention
from app.states import AttachmentState
from app.store.store import Store
from tests.attachments.conftest import photo
from tests.attachments.fake_tus import FakeTus
from tests.attachments.test_uploader import drain, server, upload_all, uploader_for
from tests.sync.fake_clock import FakeClock

__all__ = ["server"]  # the uploader tests' fake tus server

DAY = 86400.0


async def test_a_confirmed_file_is_kept_30_days_then_let_go(
    tmp_path: Path,
    store: Store,
    attachments: Attachments,
    acked: str,
    server: FakeTus,
    clock: FakeClock,
) -> None:
    view = attachments.attach(acked, photo(tmp_path))
    assert view.local_path is not None
    retention = Retention(store, attachments.files, attachments.config)
    clock.now += 40 * DAY
    assert retention.sweep() == 0, "unsent: kept however old"
    assert view.local_path.exists()
    await upload_all(store, server, clock)
    clock.now += 29 * DAY
    retention.sweep()
    assert view.local_path.exists(), "confirmed, within retention: kept for viewing"
    clock.now += 2 * DAY
    assert retention.sweep() == 1
    assert not view.local_path.exists()
    gone = attachments.get(view.id)
    assert gone is not None
    assert (gone.state, gone.local_path) == (AttachmentState.UPLOADED, None)


async def test_the_budget_evicts_confirmed_files_oldest_first_never_unsent_ones(
    tmp_path: Path, store: Store, acked: str, server: FakeTus, clock: FakeClock
) -> None:
    attachments = Attachments(store, AttachmentConfig(budget_bytes=1_000_000))
    old = attachments.attach(acked, photo(tmp_path, "old.jpg", seed=1))
    clock.now += 60
    newer = attachments.attach(acked, photo(tmp_path, "newer.jpg", seed=2))
    await upload_all(store, server, clock)
    unsent = attachments.attach(acked, photo(tmp_path, "unsent.jpg", seed=3))
    # 900 KB held; 300 KB more must fit in 1 MB: the oldest confirmed file goes, only it.
    attachments.attach(acked, photo(tmp_path, "more.jpg", seed=4))
    states = {v.filename: v.local_path is not None for v in attachments.list_for(acked)}
    assert states == {"old.jpg": False, "newer.jpg": True, "unsent.jpg": True, "more.jpg": True}
    assert old.local_path is not None
    assert not old.local_path.exists()
    assert newer.local_path is not None
    assert unsent.local_path is not None
    assert newer.local_path.exists()
    assert unsent.local_path.exists()
    # Now only unsent files and one confirmed: a file bigger than what may go is refused.
    with pytest.raises(StorageBudgetFull):
        attachments.attach(acked, photo(tmp_path, "big.jpg", size=500_000, seed=5))
    assert unsent.local_path.exists()


async def test_thumbnails_are_cached_under_the_budget(
    tmp_path: Path, store: Store, acked: str, server: FakeTus, clock: FakeClock
) -> None:
    attachments = Attachments(store, AttachmentConfig(budget_bytes=400_000))
    view = attachments.attach(acked, photo(tmp_path))
    image = b"\xff\xd8\xff" + b"j" * 50_000
    fetched: list[str] = []

    def thumbnails(request: httpx.Request) -> httpx.Response | None:
        if request.url.path.endswith("/thumbnail"):
            fetched.append(request.url.path)
            return httpx.Response(200, content=image, headers={"Content-Type": "image/jpeg"})
        return None

    server.faults.append(thumbnails)
    uploader = uploader_for(store, server)
    try:
        await drain(uploader, clock)
        first = await uploader.thumbnail(view.id)
        again = await uploader.thumbnail(view.id)
    finally:
        await uploader.aclose()
    assert first is not None
    assert first == again
    assert first.read_bytes() == image
    assert len(fetched) == 1, "the second came from the cache"
    # Room for an unsent file: the confirmed file goes, then the thumbnail.
    attachments.attach(acked, photo(tmp_path, "next.jpg", size=380_000, seed=9))
    assert not first.exists()
    assert Retention(store, attachments.files, attachments.config).usage().thumbnails == 0


def test_a_copy_left_by_an_attach_killed_before_its_row_is_swept_later(
    tmp_path: Path, store: Store, attachments: Attachments, acked: str, clock: FakeClock
) -> None:
    kept = attachments.attach(acked, photo(tmp_path, "kept.jpg", seed=1))
    # What a SIGKILL between the copy and the transaction leaves: bytes no row names.
    orphan = attachments.files.copy_in(photo(tmp_path, "orphan.jpg", seed=2), 10**9).path
    young = attachments.files.copy_in(photo(tmp_path, "young.jpg", seed=3), 10**9).path
    now = clock.time()
    for path, age in ((orphan, 2 * 3600), (young, 60)):
        os.utime(path, (now - age, now - age))
    assert kept.local_path is not None
    os.utime(kept.local_path, (now - 2 * 3600, now - 2 * 3600))
    assert Retention(store, attachments.files, attachments.config).sweep() == 1
    assert not orphan.exists()
    assert young.exists(), "may be an attach still under way in another process"
    assert kept.local_path.exists()
