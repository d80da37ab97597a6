"""``scripts/test.sh`` (the README's test command) says in one line what it needs when it can
neither find nor install it. Its happy path is what CI runs: ``.ci/run`` calls it."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sandbox() -> Iterator[Path]:
    """A copy of the script in a folder anyone may read, with a PATH folder that holds the
    tools it uses but no ``psql``: PostgreSQL with pgvector cannot be found there."""
    folder = Path(tempfile.mkdtemp(prefix="engram-test-sh-"))
    try:
        (folder / "scripts").mkdir()
        shutil.copy(ROOT / "scripts" / "test.sh", folder / "scripts" / "test.sh")
        tools = folder / "bin"
        tools.mkdir()
        for tool in ("dirname", "id", "seq", "sleep", "python3"):
            found = shutil.which(tool)
            assert found is not None, tool
            (tools / tool).symlink_to(found)
        for path in (folder, folder / "scripts", tools):
            path.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder)


def test_without_root_and_without_postgres_it_says_what_it_needs_in_one_line(
    sandbox: Path,
) -> None:
    bash = shutil.which("bash")
    assert bash is not None
    command = [bash, str(sandbox / "scripts" / "test.sh")]
    if os.geteuid() == 0:  # as root it would install what is missing: run it as nobody
        runuser = shutil.which("runuser")
        assert runuser is not None
        command = [runuser, "-u", "nobody", "--", *command]
    done = subprocess.run(
        command,
        env={"PATH": str(sandbox / "bin"), "HOME": str(sandbox)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(
        "scripts/test.sh needs PostgreSQL 15 with pgvector on 127.0.0.1:5432"
    )
    assert "run it as root on Debian" in done.stderr
