"""Schemathesis against the real server's `/openapi.json`, every check, the stateful phase too.

Each answer must be the documented one (status, content type, headers, body), every request
the document allows must be accepted and every one it forbids refused, a 405 must say `Allow`,
and the stateful phase must follow the document's links from a created conflict to the
operations that take its id. Bounded examples in `make test`, more in `make chaos`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.conftest import SCALE
from tests.chaos.helpers import add_device, record_figures
from tests.support.serve import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
TOKEN_ENV = "FIELDSYNC_FUZZ_TOKEN"
# tus (https://tus.io/protocols/resumable-upload) answers a missing or other `Tus-Resumable`
# with 412 Precondition Failed, which schemathesis does not count among the refusals. And no
# schema can spell out `Upload-Metadata` (base64 of a UUID, of a media type…): what the document
# allows there the server may still refuse as invalid (422).
_REFUSED = ["400", "401", "403", "404", "405", "406", "409", "415", "422", "428", "429", "5xx"]
_ACCEPTED = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]
_MISSING = ["400", "401", "403", "406", "415", "422"]
TUS_OPERATIONS = f"""
[[operations]]
include-path = "/v1/uploads"
include-method = "POST"
checks.positive_data_acceptance.expected-statuses = {json.dumps([*_ACCEPTED, "422"])}
checks.negative_data_rejection.expected-statuses = {json.dumps([*_REFUSED, "412"])}
checks.missing_required_header.expected-statuses = {json.dumps([*_MISSING, "412"])}

[[operations]]
include-path-regex = "^/v1/uploads"
checks.negative_data_rejection.expected-statuses = {json.dumps([*_REFUSED, "412"])}
checks.missing_required_header.expected-statuses = {json.dumps([*_MISSING, "412"])}
"""
# The token reaches schemathesis as the document's bearer scheme, not as a plain header, so
# that its `ignored_auth` and missing-header checks can leave it out.
CONFIG = f"""
[auth.openapi.HTTPBearer]
bearer = "${{{TOKEN_ENV}}}"

[phases.stateful.generation]
max-examples = {max(30, SCALE.fuzz_examples)}
{TUS_OPERATIONS}"""
CONFLICT_LINKS = {
    f"POST /v1/conflicts -> [201] {name} -> {target}"
    for name, target in (
        ("GetConflict", "GET /v1/conflicts/{conflict_id}"),
        ("ResolveConflict", "POST /v1/conflicts/{conflict_id}/resolve"),
        ("DismissConflict", "POST /v1/conflicts/{conflict_id}/dismiss"),
    )
}


def followed_links(events: Path) -> tuple[int, set[str]]:
    """The links the run's document declared, and those a stateful step followed."""
    declared = 0
    followed: set[str] = set()
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if "LoadingFinished" in event:
            declared = event["LoadingFinished"]["statistic"]["transitions"]["total"]
        recorder = (event.get("ScenarioFinished") or {}).get("recorder") or {}
        for case in recorder.get("cases", {}).values():
            transition = case.get("transition")
            if transition and case.get("is_transition_applied"):
                followed.add(transition["id"])
    return declared, followed


def declared_links(server: ServerProcess) -> int:
    import httpx

    document: dict[str, Any] = httpx.get(f"{server.base_url}/openapi.json").json()
    return sum(
        len(response.get("links", {}))
        for operations in document["paths"].values()
        for operation in operations.values()
        for response in operation["responses"].values()
    )


@pytest.fixture
def server_process(tmp_path: Path) -> Iterator[ServerProcess]:
    """The server without its rate limit: the fuzzer asks as fast as the machine lets it,
    and a 429 in place of the answer a check expects would hide what it checks (a fast
    machine got "429 when missing required 'Tus-Resumable'"). The limit has tests of its own."""
    db = tmp_path / "server" / "server.sqlite3"
    db.parent.mkdir()
    with ServerProcess(f"sqlite:///{db}", "--rate-limit-per-second", "0") as server:
        yield server


@pytest.mark.slow
def test_schemathesis_with_every_check_finds_nothing(
    tmp_path: Path, server_process: ServerProcess, chaos_seed: int
) -> None:
    token = add_device(server_process.db_url, "fuzzer", "admin")
    config, report, events = tmp_path / "st.toml", tmp_path / "run.json", tmp_path / "run.ndjson"
    config.write_text(CONFIG)
    command = [
        str(Path(sys.executable).parent / "st"), "--config-file", str(config), "run",
        f"{server_process.base_url}/openapi.json",
        "--checks", "all",
        "--max-examples", str(SCALE.fuzz_examples),
        "--seed", str(chaos_seed),
        "--workers", "1",
        "--generation-database", "none",
        "--report", "json,ndjson",
        "--report-json-path", str(report), "--report-ndjson-path", str(events),
        "--no-color",
    ]  # fmt: skip
    env = {
        **os.environ,
        TOKEN_ENV: token,
        "SCHEMATHESIS_HOOKS": "tests.chaos.fuzz_hooks",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=420, cwd=tmp_path, env=env
    )
    output = done.stdout + done.stderr
    run = json.loads(report.read_text())
    declared, followed = followed_links(events)
    cases = run["test_cases"]
    record_figures(
        "schemathesis",
        {"cases": cases["generated"], "failures": cases["unique_failures"], "checks": "all",
         "max_examples": SCALE.fuzz_examples, "seed": chaos_seed,
         "links_followed": sorted(followed)},
    )  # fmt: skip
    assert token not in output
    assert (run["failures"], run["errors"]) == ([], []), output[-8000:]
    assert done.returncode == 0, output[-8000:]
    phases = {name: phase["status"] for name, phase in run["phases"].items()}
    assert phases == {
        "examples": "skip",  # the document carries no examples
        "coverage": "success",
        "fuzzing": "success",
        "stateful": "success",
    }
    assert run["operations"]["tested"] == run["operations"]["total"] == 23
    assert cases["generated"] > 300
    assert declared == declared_links(server_process) >= len(CONFLICT_LINKS)
    assert followed & CONFLICT_LINKS, sorted(followed)
