"""Bad input end to end: damaged and newer databases, a full disk, malformed and oversized
traffic, invalid values. Each time: a clear one-line error, nothing half-written, earlier data
intact. (tests/store covers the store's own unit cases; these go through the real program.)
"""

from __future__ import annotations

import hashlib
import json
import resource
import signal
import sqlite3
from pathlib import Path

import httpx
import pytest

from app import cli
from app.store.store import Store
from tests.chaos import plans as faults
from tests.chaos.helpers import add_device, run_cli
from tests.chaos.plans import ScriptedPlan
from tests.chaos.proxy import FaultProxy
from tests.support.serve import ServerProcess

DB = "fieldsync.sqlite3"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def table_counts(data_dir: Path) -> tuple[int, int]:
    conn = sqlite3.connect(f"file:{data_dir / DB}?mode=ro", uri=True)
    try:
        jobs = conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
        rows = conn.execute("SELECT COUNT(*) FROM work_orders").fetchone()[0]
    finally:
        conn.close()
    return int(jobs), int(rows)


def seeded_device(data_dir: Path, count: int = 3) -> list[str]:
    with Store(data_dir) as store:
        return [
            store.record_edit("create", None, {"title": f"kept {i}"}).entity_id
            for i in range(count)
        ]


def test_corrupt_and_foreign_files_are_refused_untouched(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / DB).write_bytes(b"PK\x03\x04 this is a zip, not a database" * 50)
    damaged = tmp_path / "damaged"
    seeded_device(damaged, 40)
    raw = bytearray((damaged / DB).read_bytes())
    raw[4096:12288] = b"\xde\xad\xbe\xef" * 2048  # pages 2-3 overwritten, header intact
    (damaged / DB).write_bytes(bytes(raw))
    # Damaged pages behind a valid header are found at open (quick_check), so reads are
    # refused too instead of listing what is left.
    commands = (("create", "title=x"), ("list", "--json"), ("status", "--json"))
    for data_dir in (foreign, damaged):
        before = digest(data_dir / DB)
        for args in commands:
            done = run_cli(data_dir, *args)
            assert done.returncode == 1, (args, done.stdout, done.stderr)
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1, done.stderr
            assert "not a usable Fieldsync database" in lines[0], done.stderr
            assert "Traceback" not in done.stderr
        assert digest(data_dir / DB) == before


def test_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    seeded_device(tmp_path)
    conn = sqlite3.connect(tmp_path / DB)
    conn.execute("INSERT INTO schema_version (version, applied_at) VALUES (99, 0)")
    conn.commit()
    conn.close()
    before = digest(tmp_path / DB)
    done = run_cli(tmp_path, "create", "title=from the past")
    assert done.returncode == 1
    assert "newer Fieldsync" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert digest(tmp_path / DB) == before


def _limit_file_size(limit: int) -> None:
    # EFBIG instead of SIGXFSZ, as a full disk gives ENOSPC instead of a signal.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_disk_full_during_enqueue_keeps_whole_chunks_only(tmp_path: Path) -> None:
    data_dir = tmp_path / "device"
    kept = seeded_device(data_dir)
    source = tmp_path / "import.jsonl"
    with source.open("w") as fh:
        for index in range(3000):
            fh.write(json.dumps({"title": f"imported {index}", "notes": "n" * 400}) + "\n")
    import subprocess

    from tests.chaos.helpers import fieldsync_command

    done = subprocess.run(
        [*fieldsync_command(), "--data-dir", str(data_dir), "import", str(source)],
        capture_output=True, text=True, timeout=120,
        preexec_fn=lambda: _limit_file_size(1_200_000),
    )  # fmt: skip
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "full" in done.stderr or "I/O" in done.stderr, done.stderr
    jobs, rows = table_counts(data_dir)
    assert jobs == rows  # every cached edit has its job, and the reverse
    assert (jobs - len(kept)) % 500 == 0
    assert jobs - len(kept) < 3000
    with Store(data_dir) as store:
        assert all(store.cache.get(entity) is not None for entity in kept)
        store.record_edit("update", kept[0], {"title": "still writable"})


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["create", "title="], "title"),
        (["create", "title=" + "x" * 201], "at most 200"),
        (["create", "title=ok", "status=bogus"], "status"),
        (["create", "title=ok", "priority=urgent"], "priority"),
        (["create", "title=ok", "due_date=2024-13-01"], "due_date"),
        (["create", "title=ok", "colour=red"], "colour"),
        (["create", "title=ok", "notes=" + "n" * 10_001], "notes"),
        (["create", "title=ok", "deleted=maybe"], "deleted"),
        (["create", "title"], "field=value"),
        (["create", "id=not-a-uuid", "title=ok"], "UUID"),
        (["edit", "00000000-0000-4000-8000-000000000000", "title=x"], "no work order"),
    ],
)
def test_invalid_values_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    kept = seeded_device(tmp_path, 1)
    before = table_counts(tmp_path)
    assert cli.main(["--data-dir", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fieldsync: "), err
    assert "\n" not in err, err
    assert words in err, err
    assert table_counts(tmp_path) == before
    assert cli.main(["--data-dir", str(tmp_path), "edit", kept[0], "title=" + "y" * 201]) == 2
    assert table_counts(tmp_path) == before


@pytest.fixture
def device(tmp_path: Path, server_process: ServerProcess) -> tuple[Path, str]:
    return tmp_path / "device", add_device(server_process.db_url, "device")


def test_garbled_success_is_retried_and_applied_once(
    device: tuple[Path, str], proxy: FaultProxy, server_process: ServerProcess
) -> None:
    data_dir, token = device
    [entity] = seeded_device(data_dir, 1)
    proxy.set_plan(ScriptedPlan([faults.garble(), faults.truncate()], paths="/v1/mutations"))
    done = run_cli(data_dir, "sync", "--until-idle", "--timeout", "60",
                   server=proxy.base_url, token=token)  # fmt: skip
    assert done.returncode == 0, done.stderr
    with Store(data_dir) as store:
        stats = store.stats()
    assert stats["queue_depth"]["done"] == 1
    attempts = [r.upstream_status for r in proxy.snapshot() if r.path == "/v1/mutations"]
    assert attempts == [201, 201, 201]  # applied once, then replayed twice by the server
    reply = httpx.get(f"{server_process.base_url}/v1/records/{entity}",
                      headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert reply.json()["record"]["version"] == 1


def test_oversized_payload_is_dead_with_its_reason_and_blocks_nothing(
    device: tuple[Path, str], server_process: ServerProcess
) -> None:
    data_dir, token = device
    with Store(data_dir) as store:
        # A payload no current editor can produce (e.g. from a damaged or foreign queue).
        store.queue.enqueue(
            "work_orders",
            {"op": "create", "fields": {"title": "huge", "notes": "n" * 100_000}},
            "11111111-1111-4111-8111-111111111111",
        )
        fine = store.record_edit("create", None, {"title": "fine"}).entity_id
    done = run_cli(data_dir, "sync", "--until-idle", "--timeout", "60",
                   server=server_process.base_url, token=token)  # fmt: skip
    assert done.returncode == 0, done.stderr
    dead = run_cli(data_dir, "dead", "list", "--json")
    [job] = json.loads(dead.stdout)
    # The batch endpoint validates per item (422); the single endpoint would answer 413.
    assert "at most 10000 characters" in job["last_error"] or "413" in job["last_error"], job
    with Store(data_dir) as store:
        assert store.cache.get(fine)["server_version"] == 1  # type: ignore[index]


def sync(data_dir: Path, server: str, token: str, timeout: float = 30.0) -> int:
    """`fieldsync sync --until-idle` through the real entry point, in this process."""
    import os

    os.environ["FIELDSYNC_TOKEN"] = token
    try:
        return cli.main(["--data-dir", str(data_dir), "--server", server,
                         "sync", "--until-idle", "--timeout", str(timeout)])  # fmt: skip
    finally:
        del os.environ["FIELDSYNC_TOKEN"]


def _conflicting_pair(tmp_path: Path, server: ServerProcess) -> tuple[Path, str, str]:
    """Two devices edit the same field of one work order; `b` has not sent its edit yet."""
    a, b = tmp_path / "a", tmp_path / "b"
    token_a, token_b = add_device(server.db_url, "a"), add_device(server.db_url, "b")
    [entity] = seeded_device(a, 1)
    for data_dir, token in ((a, token_a), (b, token_b)):
        assert sync(data_dir, server.base_url, token) == 0
    assert cli.main(["--data-dir", str(b), "edit", entity, "title=b's title"]) == 0
    assert cli.main(["--data-dir", str(a), "edit", entity, "title=a's title"]) == 0
    assert sync(a, server.base_url, token_a) == 0
    return b, token_b, entity


def test_garbled_conflict_reply_is_retried_not_dead(
    tmp_path: Path, server_process: ServerProcess, proxy: FaultProxy
) -> None:
    b, token_b, _ = _conflicting_pair(tmp_path, server_process)
    proxy.set_plan(ScriptedPlan([faults.garble()], paths="/v1/mutations"))
    sync(b, proxy.base_url, token_b, timeout=10)
    with Store(b) as store:
        depth = store.stats()["queue_depth"]
    assert depth["dead"] == 0, depth


def test_sync_until_idle_returns_with_an_edit_waiting_behind_a_conflict(
    tmp_path: Path, server_process: ServerProcess
) -> None:
    b, token_b, entity = _conflicting_pair(tmp_path, server_process)
    assert cli.main(["--data-dir", str(b), "edit", entity, "notes=later edit"]) == 0
    code = sync(b, server_process.base_url, token_b, timeout=6)
    with Store(b) as store:
        depth = store.stats()["queue_depth"]
    assert depth["conflict"] == 1
    assert depth["pending"] == 1
    assert code == 0
