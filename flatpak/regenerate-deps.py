#!/usr/bin/env python3
"""Regenerate the Flatpak Python dependency modules from the locked device requirements.

The phone bundle installs only what `app/` and `ui/` need at run time: pyproject's
`dependencies` minus the server-only ones (the reference server is never run on a phone) and
minus PySide6, which the io.qt.PySide.BaseApp provides built against the KDE runtime's Qt.

Run on a machine with internet (it asks PyPI's simple index through pip):

    .venv/bin/python flatpak/regenerate-deps.py          # requirements-device.txt -> modules
    .venv/bin/python flatpak/regenerate-deps.py --lock   # re-lock from pyproject.toml first

It needs only pip and `packaging` (any Python >= 3.11; the project's .venv has both).

`--lock` resolves the newest versions allowed by pyproject for each target architecture with
pip's resolver, then keeps only what the target interpreter needs. pip evaluates environment
markers against the interpreter running it, not the runtime's Python, so the dependency graph
is walked again here with the runtime's markers (e.g. keyring's `importlib_metadata;
python_version < "3.12"` is dropped for Python 3.13).

Writing the modules asks pip which file it would install for each pin and architecture, downloads
that file, and writes its URL and the sha256 of the downloaded bytes in the module format
flatpak-pip-generator writes: one module per package, a wheel per architecture (`only-arches`)
where the package has compiled code, one shared source otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PYPROJECT = ROOT / "pyproject.toml"
LOCK_FILE = HERE / "requirements-device.txt"
MODULES_FILE = HERE / "python-deps.json"

INDEX_URL = "https://pypi.org/simple"

MANIFEST = HERE / "io.github.fieldsync.Fieldsync.yml"

#: CPython shipped by each org.kde.Platform branch (through its freedesktop-sdk base:
#: 24.08 has 3.12, 25.08 has 3.13). Add the new branch here when the manifest moves to it.
KDE_RUNTIME_PYTHON = {"6.8": "3.12", "6.9": "3.12", "6.10": "3.13", "6.11": "3.13"}


def manifest_runtime_version(manifest: Path = MANIFEST) -> str:
    """The manifest's quoted `runtime-version` (read as text: no YAML parser needed)."""
    text = manifest.read_text(encoding="utf-8")
    match = re.search(r"^runtime-version:\s*(['\"])([^'\"]+)\1\s*$", text, re.MULTILINE)
    if match is None:
        raise ValueError(f"{manifest.name}: no quoted runtime-version")
    return match[2]


#: Python the wheels are chosen for: the one in the manifest's runtime.
RUNTIME_PYTHON = KDE_RUNTIME_PYTHON[manifest_runtime_version()]

#: Wheel platform tags pip may pick per Flatpak architecture. The runtime's glibc is far newer
#: than any of these; pip does not widen a --platform by itself, so every tag is listed.
ARCH_PLATFORMS = {
    "x86_64": ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"],
    "aarch64": ["manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64"],
}

#: pyproject dependencies only the reference server needs: never installed on a device.
SERVER_ONLY = frozenset({"fastapi", "uvicorn", "psycopg2-binary"})

#: pyproject dependencies the io.qt.PySide.BaseApp already provides (built from source there).
FROM_BASEAPP = frozenset({"pyside6-essentials", "pyside6", "shiboken6"})

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")


def target_environment(arch: str) -> dict[str, str]:
    """Marker environment of the runtime's interpreter on `arch`, whatever runs this script."""
    env = default_environment()
    env.update(
        implementation_name="cpython",
        platform_python_implementation="CPython",
        python_version=RUNTIME_PYTHON,
        python_full_version=f"{RUNTIME_PYTHON}.0",
        implementation_version=f"{RUNTIME_PYTHON}.0",
        platform_machine=arch,
        platform_system="Linux",
        sys_platform="linux",
        os_name="posix",
    )
    return env


def device_roots(pyproject: Path = PYPROJECT) -> list[Requirement]:
    """pyproject's runtime requirements that the device bundle must provide itself."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    roots = []
    for spec in project["dependencies"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        if name not in SERVER_ONLY and name not in FROM_BASEAPP:
            roots.append(req)
    return roots


def read_lock(lock: Path = LOCK_FILE) -> dict[str, tuple[str, str]]:
    """Map canonical name -> (name as written, pinned version)."""
    pins = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        match = _PIN.match(line.strip())
        if match:
            pins[canonicalize_name(match[1])] = (match[1], match[2])
    return pins


def _pip(args: Iterable[str]) -> None:
    # --isolated: ignore this machine's pip.conf (local mirrors, constraints), use PyPI only.
    cmd = [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check", *args]
    subprocess.run(cmd, check=True)


def _target_args(arch: str) -> list[str]:
    args = ["--index-url", INDEX_URL, "--only-binary=:all:", "--python-version", RUNTIME_PYTHON]
    args += ["--implementation", "cp", "--abi", "cp" + RUNTIME_PYTHON.replace(".", "")]
    for platform in ARCH_PLATFORMS[arch]:
        args += ["--platform", platform]
    return args


def pip_report(arch: str, requirements: list[str], *, no_deps: bool) -> list[dict]:
    """What pip would install for `arch`: metadata and download info per distribution."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        req_file = Path(tmp) / "requirements.txt"
        req_file.write_text("\n".join(requirements) + "\n", encoding="utf-8")
        args = ["install", "--quiet", "--dry-run", "--ignore-installed", "--report", str(report)]
        args += [*_target_args(arch), "--target", str(Path(tmp) / "target")]
        if no_deps:
            args.append("--no-deps")
        _pip([*args, "-r", str(req_file)])
        return json.loads(report.read_text(encoding="utf-8"))["install"]


def lock() -> None:
    """Resolve pyproject's device requirements into a pinned, marker-pruned closure."""
    roots = device_roots()
    pinned: dict[str, tuple[str, str]] = {}
    via: dict[str, set[str]] = {}
    for arch in ARCH_PLATFORMS:
        items = pip_report(arch, [str(r) for r in roots], no_deps=False)
        meta = {canonicalize_name(i["metadata"]["name"]): i["metadata"] for i in items}
        env = target_environment(arch)
        todo = [(r, "pyproject.toml") for r in roots]
        while todo:
            req, parent = todo.pop()
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            name = canonicalize_name(req.name)
            if name not in meta:
                sys.exit(f"{arch}: pip did not resolve {req} (needed by {parent})")
            via.setdefault(name, set()).add(parent)
            if name in pinned:
                if pinned[name][1] != meta[name]["version"]:
                    sys.exit(f"{name}: {pinned[name][1]} on one arch, {meta[name]['version']}")
                continue
            pinned[name] = (meta[name]["name"], meta[name]["version"])
            # No extras are ever requested, so every `extra == "..."` marker is false.
            for dep in meta[name].get("requires_dist") or []:
                dep_req = Requirement(dep)
                if dep_req.marker is None or dep_req.marker.evaluate({**env, "extra": ""}):
                    todo.append((dep_req, meta[name]["name"]))
    lines = [
        "# Locked run-time requirements of the Fieldsync device app (app/ + ui/) for the",
        f"# Flatpak bundle: CPython {RUNTIME_PYTHON}, x86_64 and aarch64. Generated by",
        "#     .venv/bin/python flatpak/regenerate-deps.py --lock",
        "# from pyproject.toml's dependencies minus the server-only ones "
        f"({', '.join(sorted(SERVER_ONLY))})",
        "# and minus PySide6, which io.qt.PySide.BaseApp provides. Do not edit by hand.",
    ]
    for name in sorted(pinned):
        display, version = pinned[name]
        lines.append(f"{display}=={version}")
        lines.append(f"    # via {', '.join(sorted(via[name], key=str.lower))}")
    LOCK_FILE.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {LOCK_FILE.relative_to(ROOT)} ({len(pinned)} packages)")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _source(url: str, sha256: str, name: str, arch: str | None) -> dict:
    source: dict = {"type": "file", "url": url, "sha256": sha256}
    if arch is not None:
        source["only-arches"] = [arch]
    packagetype = "bdist_wheel" if url.endswith(".whl") else "sdist"
    source["x-checker-data"] = {"type": "pypi", "name": name, "packagetype": packagetype}
    return source


def modules() -> None:
    """Write python-deps.json from the lock: one module per package, real URLs and hashes."""
    pins = read_lock()
    requirements = [f"{display}=={version}" for display, version in pins.values()]
    files: dict[str, dict[str, tuple[str, str]]] = {}  # name -> arch -> (url, sha256)
    with tempfile.TemporaryDirectory() as tmp:
        for arch in ARCH_PLATFORMS:
            download_dir = Path(tmp) / arch
            items = pip_report(arch, requirements, no_deps=True)
            download = ["download", "--quiet", "--no-deps", "--dest", str(download_dir)]
            download += _target_args(arch)
            _pip([*download, *requirements])
            for item in items:
                name = canonicalize_name(item["metadata"]["name"])
                url = item["download_info"]["url"]
                local = download_dir / url.rsplit("/", 1)[1]
                sha256 = _sha256(local)
                index_hash = item["download_info"].get("archive_info", {}).get("hashes", {})
                if index_hash.get("sha256", sha256) != sha256:
                    sys.exit(f"{local.name}: downloaded sha256 differs from the index")
                files.setdefault(name, {})[arch] = (url, sha256)

    out = []
    for name in sorted(pins):
        display, version = pins[name]
        per_arch = files[name]
        if len(set(per_arch.values())) == 1:
            url, sha256 = next(iter(per_arch.values()))
            sources = [_source(url, sha256, display, None)]
        else:
            sources = [_source(*per_arch[arch], display, arch) for arch in ARCH_PLATFORMS]
        out.append(
            {
                "name": f"python3-{name}",
                "buildsystem": "simple",
                "build-commands": [
                    "pip3 install --verbose --exists-action=i --no-index"
                    ' --find-links="file://${PWD}" --prefix=${FLATPAK_DEST}'
                    f' "{display}=={version}" --no-build-isolation --no-deps'
                ],
                "sources": sources,
            }
        )
    tree = {
        "name": "python3-device-deps",
        "buildsystem": "simple",
        "build-commands": [],
        "modules": out,
    }
    MODULES_FILE.write_text(json.dumps(tree, indent=4) + "\n", encoding="utf-8")
    print(f"wrote {MODULES_FILE.relative_to(ROOT)} ({len(out)} modules)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--lock",
        action="store_true",
        help="re-resolve requirements-device.txt from pyproject.toml before writing modules",
    )
    args = parser.parse_args()
    if args.lock:
        lock()
    modules()


if __name__ == "__main__":
    main()
