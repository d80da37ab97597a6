"""Keys, categories and scope names can never lead a memory file out of its folder: each
attempt is a typed error, and nothing is written (no file, no record, no event)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from engramdb.core.errors import UnsafePathError, ValidationError
from engramdb.core.scope import Scope
from engramdb.providers.files.markdown import parse_file
from tests.files.conftest import ALICE, Files


def tree(root: Path) -> list[str]:
    """Every path under ``root`` (the state folder included)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


async def refused(files: Files, write: Any, error: type[Exception] = ValidationError) -> None:
    before_tree, before_log = tree(files.store.root), await files.position()
    with pytest.raises(error):
        await write
    assert tree(files.store.root) == before_tree
    assert await files.position() == before_log


@pytest.mark.parametrize(
    "key",
    ["../x", "/etc/passwd", "a/b", "a\\b", "..", "\u202eevil.md", "zero\u200bwidth", "ﬁle"],
)
async def test_unsafe_keys_are_refused(files: Files, key: str) -> None:
    await files.provider.write("ok", "fine")
    await refused(files, files.provider.write(key, "v"), UnsafePathError)
    assert await files.provider.list_keys() == ["ok"]


async def test_a_nul_in_a_key_is_refused(files: Files) -> None:
    await refused(files, files.provider.write("a\x00b", "v"))


@pytest.mark.parametrize("category", ["../x", "/etc/passwd", "a/b", ".hidden", "prof\u202eile"])
async def test_unsafe_categories_are_refused(files: Files, category: str) -> None:
    await refused(files, files.provider.write("k", "v", content_type=category))


@pytest.mark.parametrize(
    "scope",
    [
        Scope(tenant="..", user="alice"),
        Scope(tenant="acme", user="../../etc"),
        Scope(tenant="acme", user="a/b"),
        Scope(tenant="/etc", user="alice"),
        Scope(tenant="acme", user="\u202eecila"),
        Scope(tenant="acme", user=".engram"),
    ],
)
async def test_unsafe_scope_names_are_refused(files: Files, scope: Scope) -> None:
    await refused(files, files.make(scope).write("k", "v"), UnsafePathError)


async def test_a_symlinked_folder_is_refused(files: Files, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    users = files.store.root / "acme" / "users"
    users.mkdir(parents=True)
    os.symlink(outside, users / "alice")
    await refused(files, files.provider.write("k", "v"), UnsafePathError)
    assert list(outside.iterdir()) == []
    # The tenant folder itself, too.
    os.symlink(outside, files.store.root / "globex")
    bob = files.make(Scope(tenant="globex", user="bob"))
    await refused(files, bob.write("k", "v"), UnsafePathError)
    assert list(outside.iterdir()) == []


async def test_a_symlinked_file_is_refused_and_its_target_untouched(
    files: Files, tmp_path: Path
) -> None:
    await files.provider.write("user.city", "Lisbon", content_type="profile")
    secret = tmp_path / "secret.txt"
    secret.write_text("do not touch\n")
    profile = files.folder / "profile.md"
    profile.unlink()
    os.symlink(secret, profile)
    await refused(
        files, files.provider.write("user.age", 41, content_type="profile"), UnsafePathError
    )
    with pytest.raises(UnsafePathError):
        await files.provider.rescan()
    assert secret.read_text() == "do not touch\n"


async def test_a_hand_written_unsafe_key_is_refused_on_rescan(files: Files) -> None:
    await files.provider.write("user.city", "Lisbon", content_type="profile")
    profile = files.folder / "profile.md"
    profile.write_text(profile.read_text() + "## ../../escape\n\nhello\n")
    before = await files.position()
    with pytest.raises(UnsafePathError):
        await files.provider.rescan()
    assert await files.position() == before
    assert [b.key for b in parse_file(profile.read_text())][-1] == "../../escape"


async def test_other_scopes_get_their_own_folders(files: Files) -> None:
    await files.provider.write("k", "alice's")
    await files.make(Scope(tenant="acme", user="bob")).write("k", "bob's")
    await files.make(Scope(tenant="acme")).write("k", "everyone's")
    root = files.store.root
    assert "alice's" in (root / "acme/users/alice/fact.md").read_text()
    assert "bob's" in (root / "acme/users/bob/fact.md").read_text()
    assert "everyone's" in (root / "acme/shared/fact.md").read_text()
    assert files.store.scopes() == [
        Scope(tenant="acme"),
        Scope(tenant="acme", user="alice"),
        Scope(tenant="acme", user="bob"),
    ]
    assert files.folder == root / "acme/users/alice"
    assert ALICE.narrow(("tenant", "user")) in files.store.scopes()


async def test_a_fifo_or_a_symlinked_state_folder_is_refused(files: Files, tmp_path: Path) -> None:
    await files.provider.write("user.city", "Lisbon", content_type="profile")
    profile = files.folder / "profile.md"
    profile.unlink()
    os.mkfifo(profile)
    await refused(
        files, files.provider.write("user.age", 41, content_type="profile"), UnsafePathError
    )
    profile.unlink()
    outside = tmp_path / "outside"
    outside.mkdir()
    state = files.folder / ".engram"
    for entry in state.iterdir():
        entry.unlink()
    state.rmdir()
    os.symlink(outside, state)
    await refused(
        files, files.provider.write("user.age", 41, content_type="profile"), UnsafePathError
    )
    assert list(outside.iterdir()) == []
