"""The Flatpak manifest follows the rules flatpak-builder-lint and Flathub review would enforce."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from typing import Any

from packaging_support import (
    APP_ID,
    ARCHES,
    DESKTOP_FILE,
    FLATPAK_DIR,
    MANIFEST,
    METAINFO,
    RESOURCES,
    ROOT,
    iter_modules,
)

#: Exactly what the app needs: Wayland first with X11 only as a fallback, GPU, network for
#: sync, and the Secret Service for the token (docs/install.md explains this over the portal).
EXPECTED_FINISH_ARGS = {
    "--share=ipc",
    "--socket=wayland",
    "--socket=fallback-x11",
    "--device=dri",
    "--share=network",
    "--talk-name=org.freedesktop.secrets",
}


def test_flatpak_builder_parses_manifest_cleanly(
    shown_manifest: subprocess.CompletedProcess[str],
) -> None:
    # flatpak-builder only warns (exit 0) on unknown keys and source types: treat that as failure.
    assert shown_manifest.returncode == 0, shown_manifest.stderr
    problems = [
        line
        for line in shown_manifest.stderr.splitlines()
        if re.search(r"WARNING|CRITICAL|ERROR|error:", line)
    ]
    assert not problems, "\n".join(problems)


def test_runtime_is_kde_with_pyside_base_app(manifest: dict[str, Any]) -> None:
    assert manifest["id"] == APP_ID
    assert manifest["runtime"] == "org.kde.Platform"
    assert manifest["sdk"] == "org.kde.Sdk"
    assert manifest["base"] == "io.qt.PySide.BaseApp"
    assert manifest["runtime-version"] == manifest["base-version"]


def test_versions_are_quoted_and_equal_in_the_yaml() -> None:
    # Unquoted, YAML reads 6.10 as the float 6.1: require quotes in the text itself.
    text = MANIFEST.read_text(encoding="utf-8")
    versions = {}
    for key in ("runtime-version", "base-version"):
        lines = re.findall(rf"^{key}:(.*)$", text, re.MULTILINE)
        assert len(lines) == 1, f"{key} must appear once at top level"
        match = re.fullmatch(r"\s*(['\"])(\d+\.\d+)\1\s*", lines[0])
        assert match, f"{key} must be a quoted string like '6.11', got{lines[0]}"
        versions[key] = match[2]
    assert versions["runtime-version"] == versions["base-version"]


def test_finish_args_are_exactly_what_the_app_needs(manifest: dict[str, Any]) -> None:
    args = manifest["finish-args"]
    assert len(args) == len(set(args)), "duplicate finish-args"
    assert set(args) == EXPECTED_FINISH_ARGS


def test_no_bare_x11_no_portal_talk_names_no_broad_access(manifest: dict[str, Any]) -> None:
    args = manifest["finish-args"]
    assert "--socket=x11" not in args, "use --socket=fallback-x11 with --socket=wayland"
    assert {"--socket=wayland", "--socket=fallback-x11", "--share=ipc"} <= set(args)
    # Portals are reachable without permissions; asking for them is a lint error.
    assert not [a for a in args if a.startswith("--talk-name=org.freedesktop.portal.")]
    assert not [a for a in args if a.startswith(("--filesystem=", "--socket=session-bus"))]
    assert not [a for a in args if a.startswith("--own-name=")]


def test_base_app_cleanup_drops_webengine_and_numpy(manifest: dict[str, Any]) -> None:
    assert "/app/cleanup-BaseApp.sh" in manifest["cleanup-commands"]
    env = manifest["build-options"]["env"]
    assert env.get("BASEAPP_REMOVE_WEBENGINE") == "1"
    assert env.get("BASEAPP_DISABLE_NUMPY") == "1"


def test_no_dir_sources_and_app_source_is_pinned_git(manifest: dict[str, Any]) -> None:
    modules = iter_modules(manifest["modules"])
    sources = [s for m in modules for s in m.get("sources", [])]
    assert sources
    assert not [s for s in sources if s["type"] == "dir"], "no type: dir source may be submitted"
    app = next(m for m in modules if m["name"] == "fieldsync")
    (source,) = app["sources"]
    assert source["type"] == "git"
    assert source["url"].startswith("https://")
    assert "tag" in source or "commit" in source, "the app must build a fixed revision"
    assert "path" not in source


def test_builds_for_x86_64_and_aarch64_only(manifest: dict[str, Any]) -> None:
    flathub = json.loads((FLATPAK_DIR / "flathub.json").read_text(encoding="utf-8"))
    assert sorted(flathub["only-arches"]) == sorted(ARCHES)
    for module in iter_modules(manifest["modules"]):
        for source in module.get("sources", []):
            assert set(source.get("only-arches", ARCHES)) <= set(ARCHES), module["name"]
        assert "only-arches" not in module, f"{module['name']} would be missing on one arch"


def test_command_is_the_gui_entry_point(manifest: dict[str, Any]) -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert manifest["command"] in pyproject["project"]["gui-scripts"]


def test_app_id_is_consistent_across_files(manifest: dict[str, Any]) -> None:
    assert manifest["id"] == MANIFEST.stem == APP_ID
    assert DESKTOP_FILE.is_file()
    assert METAINFO.is_file()
    assert f"<id>{APP_ID}</id>" in METAINFO.read_text(encoding="utf-8")
    assert f"Icon={APP_ID}\n" in DESKTOP_FILE.read_text(encoding="utf-8")
    assert (RESOURCES / f"{APP_ID}.svg").is_file()
    assert (RESOURCES / f"{APP_ID}-symbolic.svg").is_file()
    # Nothing in resources/ is named after another id.
    for path in RESOURCES.iterdir():
        if path.suffix in {".desktop", ".xml", ".svg"}:
            assert path.name.startswith(APP_ID), f"{path.name} does not use the app id"


def test_installed_resources_exist_and_land_in_the_right_places(manifest: dict[str, Any]) -> None:
    app = next(m for m in iter_modules(manifest["modules"]) if m["name"] == "fieldsync")
    commands = "\n".join(app["build-commands"]).replace("${FLATPAK_ID}", APP_ID)
    for rel in re.findall(r"\b(resources/\S+)", commands):
        assert (ROOT / rel).is_file(), f"build-commands install missing file {rel}"
    assert f"resources/{APP_ID}.desktop -t ${{FLATPAK_DEST}}/share/applications/" in commands
    assert f"resources/{APP_ID}.metainfo.xml -t ${{FLATPAK_DEST}}/share/metainfo/" in commands
    assert "share/icons/hicolor/scalable/apps/" in commands
    assert "share/icons/hicolor/symbolic/apps/" in commands
    # The app's own dependencies come from python-deps.json, never from the network at build.
    (pip,) = [c for c in app["build-commands"] if c.startswith("pip3 install")]
    assert "--no-index" in pip
    assert "--no-deps" in pip
