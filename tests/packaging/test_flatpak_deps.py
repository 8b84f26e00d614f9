"""The committed Python modules are well-formed and cover every run-time need of the device app."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import sys
from types import ModuleType
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging_support import ARCHES, DEPS_JSON, LOCK_FILE, MANIFEST, ROOT, iter_modules

SHA256 = re.compile(r"[0-9a-f]{64}")
PYPI_FILES = "https://files.pythonhosted.org/packages/"


@pytest.fixture(scope="module")
def dep_modules() -> list[dict[str, Any]]:
    tree = json.loads(DEPS_JSON.read_text(encoding="utf-8"))
    return iter_modules(tree["modules"])


@pytest.fixture(scope="module")
def pins(regenerate: ModuleType) -> dict[str, tuple[str, str]]:
    locked: dict[str, tuple[str, str]] = regenerate.read_lock(LOCK_FILE)
    assert locked, "requirements-device.txt pins nothing"
    return locked


def _sources(modules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for m in modules for s in m.get("sources", [])]


def _filename(source: dict[str, Any]) -> str:
    return str(source["url"]).rsplit("/", 1)[1]


def test_manifest_includes_the_generated_modules(manifest: dict[str, Any]) -> None:
    names = {m["name"] for m in iter_modules(manifest["modules"])}
    tree = json.loads(DEPS_JSON.read_text(encoding="utf-8"))
    assert tree["name"] in names
    assert f"- {DEPS_JSON.name}" in MANIFEST.read_text(encoding="utf-8")


def test_every_source_is_a_pypi_file_with_a_sha256(dep_modules: list[dict[str, Any]]) -> None:
    sources = _sources(dep_modules)
    assert sources
    for source in sources:
        assert source["type"] == "file"
        assert source["url"].startswith(PYPI_FILES), source["url"]
        assert SHA256.fullmatch(source["sha256"]), f"bad sha256 for {source['url']}"
    shas = [s["sha256"] for s in sources]
    assert len(shas) == len(set(shas)), "the same file is listed twice"


def test_modules_match_the_lock_one_to_one(
    dep_modules: list[dict[str, Any]], pins: dict[str, tuple[str, str]]
) -> None:
    by_name = {m["name"]: m for m in dep_modules if m.get("sources")}
    assert set(by_name) == {f"python3-{name}" for name in pins}
    for name, (display, version) in pins.items():
        module = by_name[f"python3-{name}"]
        (command,) = module["build-commands"]
        assert f'"{display}=={version}"' in command
        assert "--no-index" in command
        for source in module["sources"]:
            filename = _filename(source)
            if filename.endswith(".whl"):
                wheel_name, wheel_version, _, _ = parse_wheel_filename(filename)
                assert (wheel_name, str(wheel_version)) == (name, version), filename
            else:
                assert filename.startswith(f"{display}-{version}."), filename


def test_each_arch_gets_exactly_one_matching_file(
    dep_modules: list[dict[str, Any]], regenerate: ModuleType
) -> None:
    cp_tag = "cp" + regenerate.RUNTIME_PYTHON.replace(".", "")
    for module in (m for m in dep_modules if m.get("sources")):
        for arch in ARCHES:
            files = [s for s in module["sources"] if arch in s.get("only-arches", ARCHES)]
            assert len(files) == 1, f"{module['name']}: {len(files)} files for {arch}"
            filename = _filename(files[0])
            if not filename.endswith(".whl"):
                continue
            tags = parse_wheel_filename(filename)[3]
            if any(t.platform == "any" for t in tags):
                continue
            # Compiled code: the wheel must be for this arch, glibc and the runtime's CPython.
            assert files[0].get("only-arches") == [arch], f"{filename} needs only-arches"
            assert all(t.platform.endswith(f"_{arch}") for t in tags), filename
            assert all(t.platform.startswith("manylinux") for t in tags), filename
            assert all(t.interpreter in (cp_tag, "cp311") for t in tags), filename
            assert all(t.abi in (cp_tag, "abi3") for t in tags), filename


def test_lock_covers_pyproject_runtime_deps_except_server_and_pyside(
    regenerate: ModuleType, pins: dict[str, tuple[str, str]]
) -> None:
    roots = regenerate.device_roots()
    assert {canonicalize_name(r.name) for r in roots} >= {"httpx", "peewee", "keyring"}
    for req in roots:
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} (pyproject) has no Flatpak module"
        assert req.specifier.contains(pins[name][1], prereleases=True), f"{req} vs {pins[name]}"
    shipped_elsewhere = regenerate.SERVER_ONLY | regenerate.FROM_BASEAPP
    assert not shipped_elsewhere & set(pins), "server deps or PySide6 leaked into the bundle"


def test_keyring_can_reach_the_secret_service(pins: dict[str, tuple[str, str]]) -> None:
    assert {"secretstorage", "jeepney", "cryptography", "cffi"} <= set(pins)


@pytest.mark.parametrize("arch", ARCHES)
def test_lock_is_closed_under_run_time_dependencies(
    arch: str, regenerate: ModuleType, pins: dict[str, tuple[str, str]]
) -> None:
    # Walk each locked package's declared requirements (from this venv's installed copy) with
    # the runtime's markers: every one must be locked at a version that satisfies it.
    env = {**regenerate.target_environment(arch), "extra": ""}
    for name, (_, version) in pins.items():
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            pytest.fail(f"{name} is locked but not installed in this venv; run `make test`")
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            dep = canonicalize_name(req.name)
            assert dep in pins, f"{name} needs {req} on {arch}; not in requirements-device.txt"
            if dist.version == version:
                assert req.specifier.contains(pins[dep][1], prereleases=True), (name, spec)


def _module_level_imports(tree: ast.Module) -> set[str]:
    """Top-level package names imported when the module loads (lazy imports in functions and
    `if TYPE_CHECKING:` blocks are allowed to need more, e.g. the embedded demo server)."""
    names: set[str] = set()
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.If):
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                todo.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            todo.extend(node.body)
    return names


def test_device_code_imports_only_what_the_bundle_ships(
    regenerate: ModuleType, pins: dict[str, tuple[str, str]]
) -> None:
    # The Flatpak has the lock, PySide6 from the base app and the stdlib, nothing else: a
    # module-level import of the server (FastAPI, uvicorn) from app/ or ui/ would crash it.
    dists_of = importlib.metadata.packages_distributions()
    missing = []
    for package in ("app", "ui"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for name in _module_level_imports(tree):
                if name in sys.stdlib_module_names or name in {"app", "ui"}:
                    continue
                dists = {canonicalize_name(d) for d in dists_of.get(name, [name])}
                if dists & (regenerate.FROM_BASEAPP | set(pins)):
                    continue
                missing.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not missing, "\n".join(missing)
