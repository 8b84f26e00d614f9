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

# Every answer's status, content type, headers and body must be the documented ones, so an
# error the server sends but `/openapi.json` does not describe fails the run too.
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    ]
)


@pytest.mark.slow
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
