"""benchmarks/staleness.py: a results file is stale once the code its benchmark declares
changed after the commit it measured, told by git history, not by dates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from staleness import GitUnavailable, declared_paths, stale_reason  # noqa: E402

BENCH = 'MEASURES = ("server/", "benchmarks/server_bench.py")\nprint("bench")\n'


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=repo, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def commit(repo: Path, path: str, text: str, message: str) -> str:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    git(repo, "add", path)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    commit(root, "benchmarks/server_bench.py", BENCH, "Add the bench")
    commit(root, "server/app.py", "v = 1\n", "Serve")
    return root


def test_the_paths_are_read_from_the_benchmark_without_running_it(repo: Path) -> None:
    assert declared_paths("server_bench", repo) == ("server/", "benchmarks/server_bench.py")
    (repo / "benchmarks" / "server_bench.py").write_text("print('no declaration')\n")
    with pytest.raises(ValueError, match="declares no MEASURES"):
        declared_paths("server_bench", repo)


def test_results_go_stale_when_their_code_changes_after_the_measured_commit(repo: Path) -> None:
    measured = git(repo, "rev-parse", "HEAD")
    assert stale_reason("server_bench", {"commit": measured}, repo) is None
    # Committing the results, or anything outside the declared paths, keeps them fresh.
    commit(repo, "benchmarks/results/server_bench.json", "{}\n", "Measure the server")
    commit(repo, "app/other.py", "x = 1\n", "Change other code")
    assert stale_reason("server_bench", {"commit": measured}, repo) is None

    changed = commit(repo, "server/app.py", "v = 2\n", "Make the server faster")
    reason = stale_reason("server_bench", {"commit": measured}, repo)
    assert reason is not None
    assert f"measured at commit {measured[:10]}" in reason
    assert f"changed after that in {changed[:10]} ('Make the server faster')" in reason
    # Measured again on the changed code (or later): fresh.
    assert stale_reason("server_bench", {"commit": changed}, repo) is None
    later = commit(repo, "README.md", "x\n", "Docs")
    assert stale_reason("server_bench", {"commit": later}, repo) is None


def test_a_change_to_the_benchmark_itself_makes_its_results_stale(repo: Path) -> None:
    measured = git(repo, "rev-parse", "HEAD")
    commit(repo, "benchmarks/server_bench.py", BENCH + "# measure more\n", "Measure more")
    assert stale_reason("server_bench", {"commit": measured}, repo) is not None


def test_a_commit_on_a_branch_that_never_reached_main_is_stale(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "side")
    side = commit(repo, "server/app.py", "v = 3\n", "Side experiment")
    git(repo, "checkout", "-q", "-")
    commit(repo, "server/app.py", "v = 4\n", "Main change")
    assert stale_reason("server_bench", {"commit": side}, repo) is not None
    assert stale_reason("server_bench", {"commit": base}, repo) is not None


def test_unknown_commits_and_missing_stamps_are_said(repo: Path) -> None:
    assert "does not have" in str(stale_reason("server_bench", {"commit": "ab" * 20}, repo))
    assert "records no commit" in str(stale_reason("server_bench", {}, repo))


def test_without_history_staleness_is_not_guessed(repo: Path, tmp_path: Path) -> None:
    measured = git(repo, "rev-parse", "HEAD")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
    with pytest.raises(GitUnavailable, match="shallow clone"):
        stale_reason("server_bench", {"commit": measured}, shallow)

    plain = tmp_path / "export"
    plain.mkdir()
    (plain / "benchmarks").mkdir()
    (plain / "benchmarks" / "server_bench.py").write_text(BENCH)
    with pytest.raises(GitUnavailable, match="not a git clone"):
        stale_reason("server_bench", {"commit": measured}, plain)


def test_without_git_installed_staleness_is_not_guessed(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(repo / "nowhere"))
    with pytest.raises(GitUnavailable, match="git cannot run"):
        stale_reason("server_bench", {"commit": "ab" * 20}, repo)
