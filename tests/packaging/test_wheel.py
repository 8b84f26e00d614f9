"""A non-editable install (`pip install .`, as in the Flatpak) ships every QML file and qmldir."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tracked(under: str) -> list[str]:
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", under], capture_output=True, text=True, check=True
    ).stdout.split()
    return [name for name in listed if (ROOT / name).is_file()]


def test_the_wheel_holds_the_qml_module_tree(tmp_path: Path) -> None:
    # Built from a copy of the sources: setuptools writes build/ and *.egg-info beside them.
    source = tmp_path / "source"
    for name in ("pyproject.toml", "README.md", *_tracked("app"), *_tracked("ui"),
                 *_tracked("server"), *_tracked("resources/icons")):  # fmt: skip
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
         "--wheel-dir", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("fieldsync-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())

    qml = _tracked("ui/qml")
    assert "ui/qml/Main.qml" in qml
    assert "ui/qml/Fieldsync/Controls/qmldir" in qml
    missing = sorted(set(qml) - shipped)
    assert missing == [], f"the wheel lacks {missing}"
