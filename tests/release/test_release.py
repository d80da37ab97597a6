"""What a release carries: the licence text, a changelog, and one version everywhere."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from typer.testing import CliRunner

import engramdb
from engramdb.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_license_file_is_the_apache_2_text_pyproject_names() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert PYPROJECT["project"]["license"] == {"text": "Apache-2.0"}
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_changelog_names_the_current_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    version = PYPROJECT["project"]["version"]
    assert re.search(rf"^## \[?{re.escape(version)}\]?", changelog, re.MULTILINE)
    assert re.search(r"^## \[?Unreleased\]?", changelog, re.MULTILINE)


def test_the_version_is_pyprojects_read_from_the_package_metadata() -> None:
    version = PYPROJECT["project"]["version"]
    assert importlib.metadata.version("engramdb") == version
    assert engramdb.__version__ == version


def test_no_other_file_of_the_package_spells_the_version_out() -> None:
    version = PYPROJECT["project"]["version"]
    spelled = [
        path.relative_to(ROOT)
        for path in (ROOT / "src" / "engramdb").rglob("*.py")
        if re.search(rf"['\"]{re.escape(version)}['\"]", path.read_text(encoding="utf-8"))
    ]
    assert spelled == []


def test_engram_version_prints_it() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"engram {engramdb.__version__}\n"
