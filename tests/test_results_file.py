"""What every benchmark's main does with its results: a table on stdout, JSON only when asked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from results_file import RunWindow, measured_code, publish, read_results  # noqa: E402


def print_figure(results: dict[str, Any]) -> None:
    print(f"figure {results['figure']}")


def test_publish_prints_the_table_and_writes_json_only_with_a_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish("demo", {"figure": 3}, print_figure, None)
    assert capsys.readouterr().out == "figure 3\n"
    assert list(tmp_path.iterdir()) == []

    target = tmp_path / "demo.json"
    publish("demo", {"figure": 3}, print_figure, target)
    assert capsys.readouterr().out.splitlines() == ["figure 3", f"wrote {target}"]
    envelope = read_results("demo", tmp_path)
    assert (envelope["name"], envelope["results"]) == ("demo", {"figure": 3})
    # The code it measured: the checked-out commit, and whether tracked files differed.
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True
    ).stdout.strip()
    assert envelope["commit"] == head
    assert isinstance(envelope["dirty"], bool)


def test_outside_a_git_clone_no_commit_is_invented(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert measured_code() == {"commit": None, "dirty": None}


def test_a_run_window_says_the_load_at_both_ends_and_how_long_it_took() -> None:
    window = RunWindow()
    metadata = window.metadata()
    assert set(metadata) == {"load_average_1m", "elapsed_s"}
    assert metadata["load_average_1m"]["start"] == window.load_start >= 0
    assert metadata["load_average_1m"]["end"] >= 0
    assert 0 <= metadata["elapsed_s"] <= window.metadata()["elapsed_s"]
