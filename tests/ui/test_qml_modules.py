"""ui/qml/ is a tree of QML modules whose qmldir files declare every type, layered one way."""

from __future__ import annotations

import re
from pathlib import Path

from ui.window import QML_DIR

MODULES = QML_DIR / "Fieldsync"
#: Which of our modules each may import: controls know no page, components no page.
MAY_IMPORT = {
    "Controls": set(),
    "Components": {"Controls"},
    "Pages": {"Controls", "Components"},
}
DECLARED = re.compile(r"^(?P<singleton>singleton )?(?P<type>[A-Z]\w*) \d+\.\d+ (?P<file>\S+\.qml)$")


def _imports(qml: Path) -> set[str]:
    return set(re.findall(r"^import Fieldsync\.(\w+)", qml.read_text(encoding="utf-8"), re.M))


def test_every_qml_file_is_in_a_module_but_the_window() -> None:
    outside = sorted(p.relative_to(QML_DIR).as_posix() for p in QML_DIR.rglob("*.qml"))
    outside = [name for name in outside if not name.startswith("Fieldsync/")]
    assert outside == ["Main.qml"]
    assert sorted(p.name for p in MODULES.iterdir()) == sorted(MAY_IMPORT)
    assert _imports(QML_DIR / "Main.qml") == set(MAY_IMPORT)


def test_each_qmldir_declares_its_module_and_every_type() -> None:
    for name in MAY_IMPORT:
        folder = MODULES / name
        lines = [
            line
            for line in (folder / "qmldir").read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")
        ]
        assert lines[0] == f"module Fieldsync.{name}"
        declared = {}
        for line in lines[1:]:
            match = DECLARED.match(line)
            assert match, f"{name}/qmldir: {line!r}"
            assert match["file"] == f"{match['type']}.qml", line
            declared[match["file"]] = bool(match["singleton"])
        files = {p.name for p in folder.glob("*.qml")}
        assert set(declared) == files, f"{name}/qmldir differs from its files"
        for file, singleton in declared.items():
            text = (folder / file).read_text(encoding="utf-8")
            assert singleton == ("pragma Singleton" in text), f"{name}/{file}"
    assert "singleton Theme 1.0 Theme.qml" in (MODULES / "Controls/qmldir").read_text()


def test_modules_import_only_the_layers_below() -> None:
    for name, allowed in MAY_IMPORT.items():
        for qml in (MODULES / name).glob("*.qml"):
            assert _imports(qml) <= allowed, f"{name}/{qml.name} imports {_imports(qml)}"


def test_the_controls_are_theme_and_every_fs_control() -> None:
    controls = {p.stem for p in (MODULES / "Controls").glob("*.qml")}
    everywhere = {p.stem for p in QML_DIR.rglob("Fs*.qml")}
    assert {"Theme", *everywhere} <= controls
