"""Paths and helpers shared by the packaging tests (a plain module: `conftest` names clash)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP_ID = "io.github.fieldsync.Fieldsync"
FLATPAK_DIR = ROOT / "flatpak"
RESOURCES = ROOT / "resources"
MANIFEST = FLATPAK_DIR / f"{APP_ID}.yml"
DEPS_JSON = FLATPAK_DIR / "python-deps.json"
LOCK_FILE = FLATPAK_DIR / "requirements-device.txt"
DESKTOP_FILE = RESOURCES / f"{APP_ID}.desktop"
METAINFO = RESOURCES / f"{APP_ID}.metainfo.xml"
WORKER_UNIT = RESOURCES / "fieldsync-worker.service"
ARCHES = ("x86_64", "aarch64")

#: Debian package providing each validator (scripts/system-deps.sh installs them).
TOOL_PACKAGES = {
    "desktop-file-validate": "desktop-file-utils",
    "appstreamcli": "appstream",
    "flatpak-builder": "flatpak-builder",
}


def run_tool(tool: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run a validator; a missing tool is a failure, never a skip (CI must not go green)."""
    if shutil.which(tool) is None:
        pytest.fail(
            f"{tool} is not installed, so this check cannot run. Install it with "
            f"`sudo apt-get install {TOOL_PACKAGES[tool]}` (or run `sh scripts/system-deps.sh`).",
            pytrace=False,
        )
    return subprocess.run(
        [tool, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def iter_modules(modules: list[Any]) -> list[dict[str, Any]]:
    """Every module of a manifest tree, depth first, nested ones included."""
    found = []
    for module in modules:
        assert isinstance(module, dict), f"unexpanded module reference: {module!r}"
        found.append(module)
        found.extend(iter_modules(module.get("modules", [])))
    return found


def load_regenerate_script() -> ModuleType:
    """flatpak/regenerate-deps.py as a module: one definition of what the device bundle needs."""
    spec = importlib.util.spec_from_file_location(
        "regenerate_deps", FLATPAK_DIR / "regenerate-deps.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
