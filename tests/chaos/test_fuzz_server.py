"""Schemathesis against the real server's `/openapi.json`, with a valid token: no 5xx, and
every response conforms to the schema. Bounded examples in `make test`, more in `make chaos`."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from tests.chaos.conftest import SCALE
from tests.chaos.helpers import add_device, record_figures
from tests.support.serve import ServerProcess

CHECKS = "not_a_server_error,response_schema_conformance"


@pytest.mark.slow
@pytest.mark.xfail(
    strict=False,
    reason="BUGS server/: (1) GET/POST /v1/conflicts/{conflict_id}[/…] with an id above 2**63-1 "
    "answers 500 (OverflowError from SQLite; routes_conflicts.py takes `conflict_id: int` "
    "unbounded); (2) 422 replies whose `detail` is a string (changes.py `since`, "
    "routes_conflicts.py `status`/`entity_id`, mutations.py InvalidMutation) violate the "
    "documented HTTPValidationError schema (detail: array)",
)
def test_schemathesis_finds_no_server_errors(
    tmp_path: Path, server_process: ServerProcess, chaos_seed: int
) -> None:
    token = add_device(server_process.db_url, "fuzzer", "admin")
    junit = tmp_path / "junit.xml"
    command = [
        str(Path(sys.executable).parent / "st"), "run",
        f"{server_process.base_url}/openapi.json",
        "--header", f"Authorization: Bearer {token}",
        "--checks", CHECKS,
        "--max-examples", str(SCALE.fuzz_examples),
        "--seed", str(chaos_seed),
        "--workers", "1",
        "--report", "junit", "--report-junit-path", str(junit),
        "--no-color",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    output = done.stdout + done.stderr
    suite = ElementTree.parse(junit).getroot()
    cases = [case for case in suite.iter("testcase")]
    failures = [case.get("name") for case in cases if case.find("failure") is not None]
    lines = output.splitlines()
    summary = [lines[i + 1].strip() for i, line in enumerate(lines[:-1]) if line == "Test cases:"]
    record_figures(
        "schemathesis",
        {"operations": len(cases), "failed_operations": failures, "summary": summary[-1:],
         "max_examples": SCALE.fuzz_examples, "seed": chaos_seed},
    )  # fmt: skip
    assert token not in output.replace(f"Bearer {token}", "")
    assert not failures, output[-6000:]
    assert done.returncode == 0, output[-6000:]
