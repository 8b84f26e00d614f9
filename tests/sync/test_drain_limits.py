"""What a day offline meets on its way out besides the server: the device's own request limit,
and the start of the `fieldsync` process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from app.sync.config import SyncConfig
from app.sync.ratelimit import TokenBucket
from server.settings import Settings


def batches(edits: int, config: SyncConfig) -> int:
    """The requests a flush makes for `edits` ready edits: its batches double while full."""
    size, sent, requests = config.batch_size, 0, 0
    while sent < edits:
        sent += size
        requests += 1
        size = min(size * 2, config.largest_batch)
    return requests


def test_a_day_offline_goes_out_without_waiting_on_the_devices_own_limit() -> None:
    config = SyncConfig(server_url="https://sync.example")
    bucket = TokenBucket(config.request_rate, config.request_burst, lambda: 0.0)
    requests = batches(20_000, config)
    assert requests > 40  # 100, 200, 400, then 500 each
    assert [bucket.delay() for _ in range(requests)] == [0.0] * requests


def test_the_devices_limit_stays_inside_the_servers() -> None:
    """A healthy device never meets the server's per-device 429."""
    config, server = SyncConfig(server_url="https://sync.example"), Settings()
    assert config.request_burst <= server.rate_limit_burst
    assert config.request_rate <= server.rate_limit_per_second


IMPORTED = "import sys, httpx; print(sorted({'rich', 'click', 'pygments'} & set(sys.modules)))"


def test_the_command_line_leaves_httpxs_own_command_line_out() -> None:
    def imported(code: str) -> str:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    if imported(IMPORTED) == "[]":
        pytest.skip("httpx's command line is not installed here: nothing to leave out")
    guarded = f"from app.process import without_httpx_cli; without_httpx_cli(); {IMPORTED}"
    assert imported(guarded) == "[]"
    client = "import httpx; httpx.Client().close(); print('works')"  # httpx itself does
    assert imported(f"from app.process import without_httpx_cli; without_httpx_cli(); {client}")
