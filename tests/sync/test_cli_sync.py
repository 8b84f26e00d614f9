"""`fieldsync` in-process: bad input exits non-zero with one line; sync, dead and conflicts
commands against the real server on loopback."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.store.cache import apply_server_record
from app.store.db import connection
from app.store.lock import WorkerLock
from app.store.store import Store
from server.embedded import EmbeddedServer
from tests.support.api import ServerApi

# Fixed, not random: pytest-xdist workers must collect the same test ids.
MISSING = "00000000-0000-4000-8000-00000000dead"


def run(capsys: pytest.CaptureFixture[str], data_dir: Path, *args: str) -> tuple[int, str, str]:
    code = main(["--data-dir", str(data_dir), *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "cli-device"


@pytest.fixture
def existing(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code, out, _ = run(capsys, data_dir, "create", "title=Pump")
    assert code == 0
    return out.strip()


BAD = [
    (["create", "title"], "expected field=value"),
    (["create", "title=Pump", "priority=urgent"], "priority"),
    (["create", "site=North"], "title"),
    (["create", "title=a", "title=b"], "given twice"),
    (["edit", MISSING, "title=x"], "no work order"),
    (["edit", "{id}", "deleted=maybe"], "deleted takes true or false"),
    (["edit", "{id}", "color=red"], "color"),
    (["delete", "not-a-uuid"], "not a work-order id"),
    (["show", MISSING], "no work order"),
    (["sync", "--until-idle"], "no server"),
    (["login"], "login needs --server"),
    (["dead", "show", "999"], "no dead job 999"),
    (["dead", "retry"], "needs a job id"),
    (["dead", "discard", "999"], "not a dead or conflicted job"),
    (["conflicts", "show", "999"], "no conflict for job 999"),
    (["conflicts", "resolve"], "needs a job id"),
    (["conflicts", "resolve", "1"], "choose one of"),
    (["conflicts", "resolve", "1", "--mine", "--theirs"], "choose one of"),
    (["conflicts", "resolve", "1", "--field", "title=both"], "--field takes"),
    (["conflicts", "resolve", "1", "--field", "title=mine", "--mine"], "not both"),
    (["conflicts", "resolve", "1", "--mine"], "no conflict for job 1"),
    (["conflicts", "escalate", "1"], "no conflict for job 1"),
    (["import", "/nonexistent/file.jsonl"], "cannot read"),
]


@pytest.mark.parametrize(("args", "reason"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_exits_non_zero_with_one_line(
    capsys: pytest.CaptureFixture[str], data_dir: Path, existing: str, args: list[str], reason: str
) -> None:
    args = [a.replace("{id}", existing) for a in args]
    code, out, err = run(capsys, data_dir, *args)
    assert code != 0
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fieldsync: ")
    assert reason in lines[0]


def test_bad_import_line_names_the_line(
    capsys: pytest.CaptureFixture[str], data_dir: Path, tmp_path: Path
) -> None:
    source = tmp_path / "orders.jsonl"
    source.write_text('{"title": "ok"}\n{"title": \n')
    code, _, err = run(capsys, data_dir, "import", str(source))
    assert code == 2
    assert err.startswith(f"fieldsync: {source}:2: not JSON")
    assert err.count("\n") == 1


def test_argparse_errors_exit_non_zero(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--data-dir", str(data_dir), "sync", "--timeout", "soon"])
    assert exited.value.code != 0
    assert "argument --timeout: not a number" in capsys.readouterr().err


# -- against the server ------------------------------------------------------------------------


def sync(capsys: pytest.CaptureFixture[str], data_dir: Path, server: EmbeddedServer) -> str:
    code, out, err = run(
        capsys, data_dir, "--server", server.base_url, "sync", "--until-idle", "--timeout", "30"
    )
    assert code == 0, err
    return out


def test_conflict_flow_through_the_cli(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    data_dir: Path,
    server: EmbeddedServer,
    token_a: str,
    api_a: ServerApi,
) -> None:
    monkeypatch.setenv("FIELDSYNC_TOKEN", token_a)
    code, out, _ = run(capsys, data_dir, "create", "title=Pump", "site=North")
    entity = out.strip()
    assert "idle" in sync(capsys, data_dir, server)
    # The office changes title and site meanwhile (same device token: another session).
    changed = api_a.update(entity, 1, title="Office title", site="Depot")
    assert changed.status_code == 200, changed.text
    assert run(capsys, data_dir, "edit", entity, "title=My title", "notes=typed")[0] == 0
    sync(capsys, data_dir, server)

    code, out, _ = run(capsys, data_dir, "conflicts", "list", "--json")
    [conflict] = json.loads(out)
    assert conflict["entity_id"] == entity
    assert conflict["kind"] == "version"
    fields = {f["name"]: f for f in conflict["fields"]}
    assert (fields["title"]["base"], fields["title"]["mine"], fields["title"]["server"]) == (
        "Pump",
        "My title",
        "Office title",
    )
    job = str(conflict["job_id"])
    code, out, _ = run(capsys, data_dir, "conflicts", "show", job)
    assert code == 0
    assert json.loads(out)["job_id"] == conflict["job_id"]
    code, out, _ = run(capsys, data_dir, "conflicts", "resolve", job, "--field", "title=mine")
    assert (code, out.strip()) == (0, "resent")
    sync(capsys, data_dir, server)
    record: dict[str, Any] = api_a.client.get(f"/v1/records/{entity}").json()["record"]
    assert (record["title"], record["site"], record["notes"], record["version"]) == (
        "My title",
        "Depot",
        "typed",
        3,
    )
    code, out, _ = run(capsys, data_dir, "conflicts", "list", "--json")
    assert json.loads(out) == []


def test_dead_retry_through_the_cli(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    data_dir: Path,
    server: EmbeddedServer,
    token_a: str,
    api_a: ServerApi,
) -> None:
    monkeypatch.setenv("FIELDSYNC_TOKEN", token_a)
    entity = run(capsys, data_dir, "create", "title=Pump")[1].strip()
    sync(capsys, data_dir, server)
    # An edit of a record the server does not know: a 404, permanent, dead-lettered.
    ghost = str(uuid.uuid4())
    with Store(data_dir) as store:
        record = {**api_a.client.get(f"/v1/records/{entity}").json()["record"], "id": ghost}
        with store.db.atomic():
            apply_server_record(connection(store.db), record, store.clock())
    assert run(capsys, data_dir, "edit", ghost, "notes=lost")[0] == 0
    sync(capsys, data_dir, server)
    code, out, _ = run(capsys, data_dir, "dead", "list", "--json")
    [dead] = json.loads(out)
    assert dead["entity_id"] == ghost
    assert dead["http_status"] == 404
    assert "not_found" in dead["last_error"] or "does not exist" in dead["last_error"]
    key = dead["idempotency_key"]
    code, out, _ = run(capsys, data_dir, "dead", "retry", str(dead["id"]))
    assert code == 0
    assert key in out
    sync(capsys, data_dir, server)
    [dead] = json.loads(run(capsys, data_dir, "dead", "list", "--json")[1])
    code, out, _ = run(capsys, data_dir, "dead", "retry", str(dead["id"]), "notes=edited")
    assert code == 0
    assert key not in out
    sync(capsys, data_dir, server)
    [dead] = json.loads(run(capsys, data_dir, "dead", "list", "--json")[1])
    code, out, _ = run(capsys, data_dir, "dead", "discard", str(dead["id"]))
    assert code == 0
    assert json.loads(run(capsys, data_dir, "dead", "list", "--json")[1]) == []


def test_decide_needs_a_decision_and_notes_follow_the_server_rules(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    data_dir: Path,
    server: EmbeddedServer,
    token_a: str,
) -> None:
    # Before: `decide --review-id N` with neither --set nor --dismiss resolved the review
    # with no fields, keeping the server's record and dropping the worker's edit.
    monkeypatch.setenv("FIELDSYNC_TOKEN", token_a)
    url = ["--server", server.base_url]
    code, _, err = run(capsys, data_dir, *url, "conflicts", "decide", "--review-id", "1")
    assert code == 2
    assert "--set field=value ... or --dismiss" in err
    # A note the server would refuse is refused here, before the conflict waits on it.
    for note, why in (("x" * 2001, "at most 2000"), ("bad\x01note", "control characters")):
        code, _, err = run(capsys, data_dir, "conflicts", "escalate", "1", "--note", note)
        assert code == 2
        assert why in err


def test_sync_while_the_worker_delivers_says_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    # Before: a CancelledError traceback after the timeout (or a silent 60 s wait).
    monkeypatch.setenv("FIELDSYNC_TOKEN", "service-token")
    Store(data_dir).close()
    lock = WorkerLock(data_dir)
    lock.acquire()
    try:
        code, _, err = run(capsys, data_dir, "--server", "http://127.0.0.1:9", "sync")
    finally:
        lock.release()
    assert code == 2
    assert err.count("\n") == 1
    assert "worker" in err
