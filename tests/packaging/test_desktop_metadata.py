"""Desktop entry and AppStream metainfo pass their validators and describe a phone-ready app."""

from __future__ import annotations

import configparser
import re
import tomllib
import xml.etree.ElementTree as ET

from packaging_support import APP_ID, DESKTOP_FILE, METAINFO, ROOT, run_tool


def _desktop_entry() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(DESKTOP_FILE, encoding="utf-8")
    return parser["Desktop Entry"]


def test_desktop_file_validate_passes() -> None:
    result = run_tool("desktop-file-validate", str(DESKTOP_FILE))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "error:" not in output, output


def test_appstreamcli_validate_passes() -> None:
    # Errors fail; warnings, infos and pedantic hints are allowed (e.g. AppStream < 1.0 does not
    # know <developer> yet and reports it as an info).
    result = run_tool("appstreamcli", "validate", "--no-net", "--explain", str(METAINFO))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    errors = [line for line in output.splitlines() if line.startswith("E:")]
    assert not errors, output


def test_desktop_entry_targets_phones_and_desktops() -> None:
    entry = _desktop_entry()
    assert entry["Icon"] == APP_ID
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert entry["Exec"].split()[0] in pyproject["project"]["gui-scripts"]
    purism = entry["X-Purism-FormFactor"].rstrip(";").split(";")
    assert {"Workstation", "Mobile"} <= set(purism)
    kde = entry["X-KDE-FormFactor"].rstrip(";").split(";")
    assert {"desktop", "handset"} <= set(kde)


def test_metainfo_declares_mobile_requirements() -> None:
    root = ET.parse(METAINFO).getroot()
    assert root.get("type") == "desktop-application"
    assert root.findtext("id") == APP_ID
    assert root.findtext("launchable") == f"{APP_ID}.desktop"
    controls = {c.text for c in root.findall("supports/control")}
    assert {"touch", "keyboard", "pointing"} <= controls
    (length,) = root.findall("requires/display_length")
    assert length.get("compare") == "ge"
    assert int(length.text or "0") == 360
    assert root.findtext("recommends/internet") == "always"
    rating = root.find("content_rating")
    assert rating is not None
    assert rating.get("type") == "oars-1.1"


def test_metainfo_has_release_notes_and_screenshots() -> None:
    root = ET.parse(METAINFO).getroot()
    releases = root.findall("releases/release")
    assert releases
    for release in releases:
        assert re.fullmatch(r"\d+\.\d+\.\d+", release.get("version", ""))
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", release.get("date", ""))
        assert release.find("description") is not None, "every release needs notes"
    images = [i.text or "" for i in root.findall("screenshots/screenshot/image")]
    pages = {re.sub(r".*/resources/screenshots/(\w+)\.png$", r"\1", url) for url in images}
    assert {"list", "editor", "conflict"} <= pages
    assert all(url.startswith("https://") for url in images)
    defaults = root.findall("screenshots/screenshot[@type='default']")
    assert len(defaults) == 1


def test_project_version_has_a_release_entry() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    versions = {r.get("version") for r in ET.parse(METAINFO).getroot().iter("release")}
    assert pyproject["project"]["version"] in versions
