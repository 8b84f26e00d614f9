"""benchmarks/report.py: the documents' figure tables are rendered from the results files, and
`--check` fails when a figure in a document is not the one its JSON holds."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import report  # noqa: E402
from results_file import read_results  # noqa: E402

DOC = """# Some document

Prose the report never touches: 5,148 edits/s.

<!-- report:begin queue -->
whatever was here before
<!-- report:end queue -->

More prose.
"""


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.strip()


HEAD = git("rev-parse", "HEAD")


def envelope(results: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    return {
        "name": "queue_bench",
        "date": "2026-12-01T10:05:00+00:00",
        "command": "queue_bench.py --json",
        "commit": HEAD,
        "dirty": False,
        "machine": {
            "hostname": "bench-host",
            "cpus": 2,
            "python": "3.11.2",
            "platform": "Linux",
            "load_average_1m": 2.46,
        },
        "results": results,
        **overrides,
    }


@pytest.fixture
def queue_results() -> dict[str, Any]:
    """The committed queue figures, whose shape the renderer reads."""
    results: dict[str, Any] = copy.deepcopy(read_results("queue_bench")["results"])
    results["enqueue"]["fieldsync"] = 1234.4
    return results


def write(directory: Path, name: str, data: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.json").write_text(json.dumps(data))


def queue_document(tmp_path: Path, data: dict[str, Any]) -> tuple[Path, Path]:
    """A results dir holding `data` as queue_bench.json, and a document with a queue block."""
    results, doc = tmp_path / "results", tmp_path / "doc.md"
    write(results, "queue_bench", data)
    doc.write_text(DOC)
    return results, doc


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    code = report.main([str(arg) for arg in args])
    return code, capsys.readouterr().err


def test_committed_documents_match_their_results() -> None:
    """What `make test` runs: README.md and docs/ hold the committed figures."""
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "report.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr


def test_check_fails_on_a_changed_figure_and_the_rewrite_restores_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], queue_results: dict[str, Any]
) -> None:
    results, doc = queue_document(tmp_path, envelope(queue_results))

    assert run(capsys, "--check", "--results", results, doc)[0] == 1
    assert doc.read_text() == DOC  # --check changes nothing
    assert run(capsys, "--results", results, doc)[0] == 0
    rendered = doc.read_text()
    assert "| edit: the cached work order and its job (a peer: one put) | 1,234 |" in rendered
    assert "whatever was here before" not in rendered
    assert "Prose the report never touches: 5,148 edits/s." in rendered
    assert rendered.endswith("<!-- report:end queue -->\n\nMore prose.\n")
    # The machine and the date of the run beside its figures.
    assert "`queue_bench.py --json` on bench-host (2 CPUs, Python 3.11.2" in rendered
    assert f"Linux, load 2.5 when written), 2026-12-01 10:05 UTC, commit {HEAD[:10]}." in rendered
    assert run(capsys, "--check", "--results", results, doc) == (0, "")

    doc.write_text(rendered.replace("| 1,234 |", "| 1,235 |"))
    code, err = run(capsys, "--check", "--results", results, doc)
    assert code == 1
    assert "block 'queue': differs from its results" in err
    assert str(doc) in err

    assert run(capsys, "--results", results, doc)[0] == 0
    assert doc.read_text() == rendered


def test_a_new_run_makes_the_document_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], queue_results: dict[str, Any]
) -> None:
    results, doc = queue_document(tmp_path, envelope(queue_results))
    assert run(capsys, "--results", results, doc)[0] == 0

    write(results, "queue_bench", envelope(queue_results, date="2026-12-02T08:00:00+00:00"))
    code, err = run(capsys, "--check", "--results", results, doc)
    assert (code, "block 'queue': differs" in err) == (1, True)


def test_missing_results_fail_and_no_figure_is_left_or_invented(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- report:begin sync -->\nold 5,148/s\n<!-- report:end sync -->\n")
    code, err = run(capsys, "--check", "--results", tmp_path / "none", doc)
    assert code == 1
    assert "block 'sync': no figures:" in err
    assert "sync_bench.json has not been written" in err
    assert "benchmarks/sync_bench.py --json" in err

    # The rewrite says what is missing instead of keeping old figures, and still fails.
    assert run(capsys, "--results", tmp_path / "none", doc)[0] == 1
    text = doc.read_text()
    assert "5,148" not in text
    assert "_No figures here: " in text
    assert run(capsys, "--check", "--results", tmp_path / "none", doc)[0] == 1


@pytest.mark.parametrize(
    ("remove", "said"),
    [
        # A figure the renderer looks up by name.
        (lambda r: r.pop("claim_ack_full"), "has no figure 'claim_ack_full.fieldsync'"),
        # One read inside a list of figures, below the named lookups.
        (
            lambda r: r["targets"][0].pop("met"),
            "queue_bench.json not in the shape this block reads (KeyError: 'met')",
        ),
    ],
    ids=["missing figure", "other shape"],
)
def test_a_missing_figure_is_named(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    queue_results: dict[str, Any],
    remove: Callable[[dict[str, Any]], object],
    said: str,
) -> None:
    remove(queue_results)
    results, doc = queue_document(tmp_path, envelope(queue_results))
    code, err = run(capsys, "--check", "--results", results, doc)
    assert code == 1
    assert said in err


def test_a_file_that_is_not_an_envelope_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], queue_results: dict[str, Any]
) -> None:
    results, doc = queue_document(tmp_path, queue_results)  # bare figures, as scripts wrote
    code, err = run(capsys, "--check", "--results", results, doc)
    assert code == 1
    assert "has no 'date' (not an envelope)" in err


def test_unknown_blocks_and_unclosed_markers_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "<!-- report:begin nonsense -->\nx\n<!-- report:end nonsense -->\n"
        "<!-- report:begin queue -->\nno end marker\n"
    )
    code, err = run(capsys, "--check", "--results", tmp_path, doc)
    assert code == 1
    assert "block 'nonsense': no such block" in err
    assert "block 'queue': a begin marker without its end" in err


def test_results_older_than_their_code_fail_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], queue_results: dict[str, Any]
) -> None:
    """Measured before the last change to what queue_bench declares (app/store/ among it)."""
    before = git("rev-parse", f"{git('log', '-1', '--format=%H', '--', 'app/store/')}^")
    results, doc = queue_document(tmp_path, envelope(queue_results, commit=before))
    assert run(capsys, "--results", results, doc)[0] == 1  # the rewrite fails too
    assert f"commit {before[:10]}" in doc.read_text()
    code, err = run(capsys, "--check", "--results", results, doc)
    assert code == 1
    assert f"queue_bench.json: stale: measured at commit {before[:10]}, but its code" in err
    assert "run `benchmarks/queue_bench.py --json" in err

    write(results, "queue_bench", envelope(queue_results))  # measured again at HEAD
    assert run(capsys, "--results", results, doc)[0] == 0
    assert run(capsys, "--check", "--results", results, doc) == (0, "")


def test_results_without_a_commit_are_shown_so_and_noted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], queue_results: dict[str, Any]
) -> None:
    old = envelope(queue_results)
    del old["commit"], old["dirty"]
    results, doc = queue_document(tmp_path, old)
    code, err = run(capsys, "--results", results, doc)
    assert code == 0
    assert "2026-12-01 10:05 UTC, commit not recorded." in doc.read_text()
    assert "queue_bench.json records no commit" in err
    assert "run `benchmarks/queue_bench.py --json" in err
