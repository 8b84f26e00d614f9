"""`make run` installs what running needs only; the server is an extra the app can do without."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER_PACKAGES = {
    "fastapi",
    "uvicorn",
    "httptools",
    "psycopg2-binary",
    "pillow",
    # The office console (server/console/).
    "jinja2",
    "python-multipart",
    "argon2-cffi",
    "segno",
}
TEST_ONLY_DEBIAN = {
    "postgresql",
    "gnome-keyring",
    "dbus",
    "desktop-file-utils",
    "appstream",
    "flatpak-builder",
    "chromium",
}


def _names(specs: list[str]) -> set[str]:
    return {s.split(">")[0].split("=")[0].split("[")[0].split("<")[0].strip() for s in specs}


def test_the_server_packages_are_an_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert _names(project["dependencies"]) & SERVER_PACKAGES == set()
    assert _names(project["optional-dependencies"]["server"]) == SERVER_PACKAGES
    assert "fieldsync[server]" in project["optional-dependencies"]["dev"]


def _packages(which: str) -> set[str]:
    out = subprocess.run(
        ["sh", str(ROOT / "scripts/system-deps.sh"), which, "--list"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(out.split())


def test_run_needs_the_qt_libraries_only() -> None:
    run, test = _packages("run"), _packages("test")
    assert {"libegl1", "libxkbcommon0", "libfontconfig1", "libxcb-cursor0"} <= run
    assert run & TEST_ONLY_DEBIAN == set()
    assert TEST_ONLY_DEBIAN | run <= test


def _make_dry_run(target: str, tmp_path: Path) -> str:
    # A venv that does not exist: make prints every step it would take, runs none.
    return subprocess.run(
        ["make", "-n", "-C", str(ROOT), target, f"VENV={tmp_path / 'venv'}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_make_run_installs_the_app_and_server_not_the_dev_tools(tmp_path: Path) -> None:
    steps = _make_dry_run("run", tmp_path)
    assert "scripts/system-deps.sh run" in steps
    assert "pip install --quiet -e '.[server]'" in steps
    assert "dev" not in steps
    tests = _make_dry_run("test", tmp_path)
    assert "scripts/system-deps.sh test" in tests
    assert "pip install --quiet -e '.[dev,server]'" in tests


# Refuses the server extra's packages, as an environment without fieldsync[server] would.
_WITHOUT_SERVER = textwrap.dedent(
    """
    import importlib.abc, sys
    class NoServerExtra(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {"fastapi", "starlette", "uvicorn", "psycopg2", "PIL"}:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None
    sys.meta_path.insert(0, NoServerExtra())
    """
)


def _without_server(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "QT_QUICK_BACKEND": "software"}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_SERVER + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def test_the_app_imports_without_the_server_extra(tmp_path: Path) -> None:
    result = _without_server(
        """
        import app.cli, app.sync.engine, ui.main, ui.window, ui.viewmodels.app
        print("app imported")
        try:
            import fastapi
        except ModuleNotFoundError:
            print("no fastapi here")
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    # The blocker works (fastapi is installed in this venv), and the app did not need it.
    assert result.stdout.split() == ["app", "imported", "no", "fastapi", "here"]


def test_the_embedded_server_says_it_needs_the_extra(tmp_path: Path) -> None:
    result = _without_server(
        f"""
        import ui.main
        raise SystemExit(ui.main.main(["--data-dir", {str(tmp_path / "data")!r}]))
        """,
        tmp_path,
    )
    assert result.returncode == 2, result.stderr
    assert "the embedded sync server needs the fieldsync[server] extra" in result.stderr
    assert "--server URL" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_sync_state_icons_ship_with_the_app() -> None:
    theme = (ROOT / "ui/qml/Fieldsync/Controls/Theme.qml").read_text(encoding="utf-8")
    known = theme.split("const known = [", 1)[1].split("]", 1)[0]
    kinds = [k.strip().strip('"') for k in known.split(",")]
    assert {"synced", "pending", "sending", "retrying", "conflict", "failed"} <= set(kinds)
    icons = ROOT / "resources/icons"
    for kind in kinds:
        svg = (icons / f"sync-{kind}.svg").read_text(encoding="utf-8")
        assert svg.startswith("<svg "), kind
        assert "viewBox" in svg, kind
    # pip installs them where ui/window.py looks (share/fieldsync/icons under the prefix).
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    data_files = config["tool"]["setuptools"]["data-files"]
    assert data_files["share/fieldsync/icons"] == ["resources/icons/*.svg"]
    qml = config["tool"]["setuptools"]["package-data"]["ui"]
    assert "qml/**/qmldir" in qml
