"""Wheels for a virtualenv built offline: the engramdb-client wheel (its own in-tree build
backend) and this interpreter's installed copies of its dependencies, repacked as wheels, so a
fresh environment gets the same versions without reaching an index."""

from __future__ import annotations

import importlib.util
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from types import ModuleType

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
CLIENT_PROJECT = ROOT / "clients" / "python"


def client_build() -> ModuleType:
    """``clients/python/build_wheel.py``, the client's build backend, as a module."""
    spec = importlib.util.spec_from_file_location("build_wheel", CLIENT_PROJECT / "build_wheel.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def repacked(requirements: list[str], dest: Path) -> list[Path]:
    """Wheels of the installed distributions ``requirements`` need, transitively (extras
    left out), each repacked from its installed files (compiled ones included, which is right
    for this machine only)."""
    build = client_build()
    wheels: list[Path] = []
    seen: set[str] = set()
    pending = [Requirement(r) for r in requirements]
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in seen or (
            requirement.marker is not None and not requirement.marker.evaluate({"extra": ""})
        ):
            continue
        seen.add(name)
        try:
            dist = distribution(requirement.name)
        except PackageNotFoundError:  # an optional dependency this machine lacks
            continue
        base = Path(str(dist.locate_file("")))
        files = {
            str(path): (base / path).read_bytes()
            for path in dist.files or []
            if ".." not in path.parts  # scripts outside site-packages
            and "__pycache__" not in path.parts
            and not path.parts[0].endswith(".dist-info")
        }
        metadata = dist.read_text("METADATA") or ""
        wheels.append(build.write_wheel(dest, dist.name, dist.version, metadata, files))
        pending.extend(Requirement(r) for r in dist.requires or [])
    return wheels
