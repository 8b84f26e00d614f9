"""Server configuration: one frozen dataclass, filled from flags, the environment or tests."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import platformdirs

__all__ = ["DB_ENV_VAR", "Settings", "default_db_url"]

#: Environment variable naming the database URL when `--db` is not given.
DB_ENV_VAR = "FIELDSYNC_SERVER_DB"

_DAY = 86_400.0


def default_db_url() -> str:
    """`FIELDSYNC_SERVER_DB`, else a SQLite file in the XDG data dir."""
    from_env = os.environ.get(DB_ENV_VAR, "").strip()
    if from_env:
        return from_env
    data_dir = Path(platformdirs.user_data_dir("fieldsync-server", appauthor=False))
    return f"sqlite:///{data_dir / 'server.sqlite3'}"


@dataclass(frozen=True)
class Settings:
    """Everything a server instance needs; defaults are the production defaults."""

    db_url: str = field(default_factory=default_db_url)
    #: Largest accepted body for single-item endpoints (413 above it).
    max_body_bytes: int = 64 * 1024
    #: Largest accepted body for `/v1/mutations/batch` (up to 500 items of a few KiB each).
    max_batch_body_bytes: int = 8 * 1024 * 1024
    max_batch_items: int = 500
    #: How long a completed idempotency key (and its stored response) is kept. It must outlive
    #: the longest time a device stays offline plus its retry horizon: a device that lost the
    #: response before going offline for three weeks retries with the same key, and only the
    #: stored response turns that retry into a replay instead of a spurious version conflict.
    idempotency_retention_seconds: float = 30 * _DAY
    #: A claim still `processing` after this long is treated as abandoned (crashed process)
    #: and may be taken over by a retry.
    idempotency_lease_seconds: float = 30.0
    #: `Retry-After` sent with 409 idempotency_key_in_use.
    in_use_retry_after_seconds: int = 1
    #: Per-device token bucket: `burst` requests at once, refilled at `per_second`. A batch
    #: counts as one request, so 10,000 edits (20 batches) never come close; a client stuck in
    #: a tight retry loop is stopped within seconds. `per_second <= 0` disables the limit.
    rate_limit_burst: int = 300
    rate_limit_per_second: float = 30.0
    #: Keep the buckets in the database, shared by every server process on it (True), or in
    #: each process's memory (False); None: in the database on PostgreSQL, in memory on SQLite
    #: (a single process, where a write per request would only wait on the writers' lock).
    rate_limit_shared: bool | None = None
    #: Admission (server/admission/): device requests one process works on at once (each
    #: holds a database connection; 0: no bound), how many more may wait for a turn and for
    #: how long; every other one is answered 429 with a `Retry-After` of at most
    #: `busy_retry_after_max_seconds`.
    max_in_flight_requests: int = 16
    max_queued_requests: int = 256
    queue_wait_seconds: float = 10.0
    busy_retry_after_max_seconds: int = 10
    #: How often the background pruner deletes expired idempotency keys.
    prune_interval_seconds: float = 3600.0
    #: Where attachment files live (content-addressed) and unfinished uploads wait; None puts
    #: them in `attachments/` beside a SQLite database, or in the XDG data dir for PostgreSQL.
    attachments_dir: str | None = None
    #: Largest file a tus upload may announce (`Upload-Length`; 413 above it).
    max_upload_bytes: int = 100 * 1024 * 1024
    #: The media types an attachment may have (`type/*` allows a whole family; 415 otherwise).
    attachment_content_types: tuple[str, ...] = ("image/*", "application/pdf", "audio/*",
                                                 "text/plain")  # fmt: skip
    #: What one device's unfinished uploads may announce together (507 above it, 413 for a
    #: single file larger than this), and what one user's stored files plus unfinished
    #: uploads may reach (server/uploads/budgets.py).
    device_unfinished_bytes: int = 1024 * 1024 * 1024
    user_stored_bytes: int = 20 * 1024 * 1024 * 1024
    #: Uploads stop this short of a full disk (507), so that edits always find room.
    min_free_disk_bytes: int = 512 * 1024 * 1024
    #: How long a request on an upload waits for the one before it to let go (423 after).
    upload_lock_wait_seconds: float = 10.0
    #: An unfinished upload expires this long after its last chunk (`Upload-Expires`).
    upload_expiry_seconds: float = 7 * _DAY
    #: What a worker's search (`GET /v1/records?q=`) and single reads reach: "all" work
    #: orders of the organisation, or only those in the device's scope.
    worker_search: Literal["all", "scope"] = "all"
    search_default_limit: int = 50
    search_max_limit: int = 200
    changes_default_limit: int = 100
    changes_max_limit: int = 1000
    #: The office console (server/console/): mark its session cookie `Secure` (behind TLS).
    console_secure_cookies: bool = False
    #: A console session ends this long after sign-in.
    console_session_seconds: float = 12 * 3600.0
    #: Failed console sign-ins allowed per user name and per address within the window.
    console_sign_in_failures_per_name: int = 5
    console_sign_in_failures_per_address: int = 20
    console_sign_in_window_seconds: float = 900.0
    #: The fleet colours a device's last sync green under `amber` seconds, amber under `red`,
    #: red beyond.
    console_sync_amber_seconds: float = _DAY
    console_sync_red_seconds: float = 7 * _DAY
    #: How often an open fleet page refreshes itself.
    console_poll_seconds: int = 10
    #: Wall clock (epoch seconds); injected by tests of retention and rate limiting.
    clock: Callable[[], float] = field(default=time.time, compare=False)
    #: Monotonic clock for the rate limiter.
    monotonic: Callable[[], float] = field(default=time.monotonic, compare=False)
