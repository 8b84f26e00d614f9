"""The house's floors, read from the source: who may import whom, and what screens may touch.

`app/` is the core and imports no Qt (nor `ui/`, nor `server/`); `ui/` reaches the server's
code only through the embedded launcher (`ui/embedded.py`, the one-window demo); view-models
read the store through its read API (`Store.work_order`, `work_orders`, ...), never its
`cache` nor SQL of their own; no screen wakes the engine (it wakes itself). Checked on the
syntax tree, so a late import inside a function counts too.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
QT = ("PySide6", "shiboken6", "qasync")
#: The only module of ui/ that starts the server in-process.
EMBEDDED_LAUNCHER = "ui/embedded.py"


def sources(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def imported(path: Path) -> Iterator[tuple[int, str]]:
    """Every module ``path`` imports (absolute names; relative imports are not used here)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module


def top(module: str) -> str:
    return module.split(".")[0]


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


def test_the_folders_hold_code() -> None:
    # A guard that walks no file passes for nothing.
    assert len(sources("app")) > 50
    assert len(sources("ui/viewmodels")) > 10


def test_app_imports_no_qt_and_no_ui_or_server() -> None:
    banned = {*QT, "ui", "server"}
    found = [
        f"{where(path, line)} imports {module}"
        for path in sources("app")
        for line, module in imported(path)
        if top(module) in banned
    ]
    assert found == []


def test_ui_imports_server_only_in_the_embedded_launcher() -> None:
    found = [
        f"{where(path, line)} imports {module}"
        for path in sources("ui")
        if path.relative_to(ROOT).as_posix() != EMBEDDED_LAUNCHER
        for line, module in imported(path)
        if top(module) == "server"
    ]
    assert found == []


def cache_reads(path: Path) -> Iterator[int]:
    """Lines where ``path`` reaches for a ``.cache`` attribute (``store.cache.get``)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr == "cache":
            yield node.lineno


def test_view_models_read_the_store_through_its_read_api() -> None:
    found = [where(path, line) for path in sources("ui") for line in cache_reads(path)]
    assert found == []


#: The start of an SQL statement, as the store's modules write them.
SQL = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|REPLACE|WITH)\s")


def sql_texts(path: Path) -> Iterator[int]:
    """Lines where ``path`` writes SQL: a string (or an f-string's text) starting a statement."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.match(node.value):
            yield node.lineno


def test_screens_write_no_sql() -> None:
    # What a screen needs from the tables has a reader in app/ (`drafted_among`, ...).
    found = [where(path, line) for path in sources("ui") for line in sql_texts(path)]
    assert found == []


def test_the_sql_reader_sees_a_query_in_an_f_string(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text('def load(store, m):\n    return store.read(f"SELECT id FROM t WHERE {m}")\n')
    assert list(sql_texts(path)) == [2]
    path.write_text('WORDS = "Select a work order to see it"\n')
    assert list(sql_texts(path)) == []


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ("from PySide6.QtCore import QObject\n", True),
        ("def late():\n    import shiboken6\n", True),
        ("from app.store.store import Store\n", False),
    ],
)
def test_the_import_reader_sees_late_imports(tmp_path: Path, source: str, caught: bool) -> None:
    path = tmp_path / "probe.py"
    path.write_text(source)
    assert any(top(module) in QT for _, module in imported(path)) is caught


def test_the_cache_reader_sees_a_reach_into_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text("def load(store):\n    return store.cache.get('x')\n")
    assert list(cache_reads(path)) == [2]


def wake_calls(path: Path) -> Iterator[int]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "wake"
        ):
            yield node.lineno


def test_no_screen_wakes_the_engine() -> None:
    # The engine wakes itself on an operation's OpChanges (`SyncEngine.on_event`).
    found = [where(path, line) for path in sources("ui") for line in wake_calls(path)]
    assert found == []
