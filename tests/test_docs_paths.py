"""Every file or folder of this repository that README.md or docs/ names still exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A path starting at a top-level folder of the repository, not inside a longer word or path.
NAMED = re.compile(
    r"(?<![\w./-])((?:app|ui|server|benchmarks|tests|scripts|resources|docs|flatpak)/[\w./-]*\w)"
)


def named_paths(text: str) -> set[str]:
    # Patterns (`Fs*.qml`) and placeholders (`<size>-<light|dark>/`) name no one file.
    return {m[1] for m in NAMED.finditer(text) if not re.search(r"[*<{]", text[m.end(1) :][:1])}


def test_the_documents_name_only_paths_that_exist() -> None:
    missing = [
        f"{document.relative_to(ROOT)}: {path}"
        for document in DOCUMENTS
        for path in sorted(named_paths(document.read_text(encoding="utf-8")))
        if not (ROOT / path).exists()
    ]
    assert missing == []


def test_a_moved_file_is_caught() -> None:
    assert named_paths("see `server/scope_routes.py` and ui/qml/Fs*.qml, not `x/app/y.py`") == {
        "server/scope_routes.py"
    }
