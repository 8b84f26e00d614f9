"""Fixtures for the packaging tests: the manifest as flatpak-builder parses it."""

from __future__ import annotations

import json
import subprocess
from types import ModuleType
from typing import Any

import pytest
from packaging_support import MANIFEST, load_regenerate_script, run_tool


@pytest.fixture(scope="session")
def shown_manifest() -> subprocess.CompletedProcess[str]:
    """`flatpak-builder --show-manifest`: the manifest as flatpak-builder itself parses it."""
    return run_tool("flatpak-builder", "--show-manifest", str(MANIFEST))


@pytest.fixture(scope="session")
def manifest(shown_manifest: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The parsed manifest with included module files (python-deps.json) expanded."""
    assert shown_manifest.returncode == 0, shown_manifest.stderr
    return json.loads(shown_manifest.stdout)


@pytest.fixture(scope="session")
def regenerate() -> ModuleType:
    return load_regenerate_script()
