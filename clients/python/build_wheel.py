"""The build backend (PEP 517) of engramdb-client: a wheel of the repository's ``src``,
offline, with the standard library alone: the modules ``pyproject.toml`` lists (with each
package's ``__init__``), its name, version and dependencies, written as PEP 427 says.

    pip wheel clients/python                    # through pip
    python clients/python/build_wheel.py DEST   # directly; prints the wheel's path
"""

from __future__ import annotations

import base64
import hashlib
import sys
import tomllib
import zipfile
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parents[1] / "src"


def write_wheel(
    dest: Path, name: str, version: str, metadata: str, files: Mapping[str, bytes]
) -> Path:
    """A pure-Python wheel of ``files`` (archive name to content) with the core ``metadata``
    (the text of METADATA), its WHEEL and RECORD written as PEP 427 says."""
    stem = f"{name.replace('-', '_')}-{version}"
    info = f"{stem}.dist-info"
    contents = {
        **files,
        f"{info}/METADATA": metadata.encode(),
        f"{info}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: engramdb build_wheel\n"
            b"Root-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = [f"{path},sha256={_digest(data)},{len(data)}" for path, data in contents.items()]
    contents[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,", ""]).encode()
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in contents.items():
            archive.writestr(path, data)
    return wheel


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def client_files(modules: list[str]) -> dict[str, bytes]:
    """The source of ``modules`` and of the ``__init__`` of every package above them."""
    paths = {"engramdb/py.typed"}
    for module in modules:
        parts = module.split(".")
        paths.add("/".join(parts) + ".py")
        paths.update("/".join(parts[:depth]) + "/__init__.py" for depth in range(1, len(parts)))
    return {path: (SOURCE / path).read_bytes() for path in sorted(paths)}


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, object] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """The PEP 517 hook: build the wheel into ``wheel_directory``, return its file name."""
    return client_wheel(Path(wheel_directory)).name


def client_wheel(dest: Path) -> Path:
    """Build the wheel into ``dest`` and return its path."""
    config = tomllib.loads((HERE / "pyproject.toml").read_text())
    project = config["project"]
    metadata = "\n".join(
        [
            "Metadata-Version: 2.1",
            f"Name: {project['name']}",
            f"Version: {project['version']}",
            f"Summary: {project['description']}",
            f"Requires-Python: {project['requires-python']}",
            *(f"Requires-Dist: {requirement}" for requirement in project["dependencies"]),
            "Description-Content-Type: text/markdown",
            "",
            (HERE / project["readme"]).read_text(),
        ]
    )
    files = client_files(config["tool"]["engramdb-client"]["modules"])
    return write_wheel(dest, project["name"], project["version"], metadata, files)


if __name__ == "__main__":
    print(client_wheel(Path(sys.argv[1])))
