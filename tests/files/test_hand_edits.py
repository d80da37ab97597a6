"""A person edits the memory files; ``rescan()`` turns the edits into events and the files
are regenerated from the log, byte for byte."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from engramdb.core.errors import MemoryFileError
from engramdb.providers.event_sourced import EventSourcedProvider
from engramdb.providers.files import provider as provider_module
from tests.files.conftest import ALICE, Files


def snapshot(folder: Path) -> dict[str, str]:
    """Every visible memory file of a folder and its text."""
    return {p.name: p.read_text() for p in sorted(folder.glob("*.md"))}


async def seed(files: Files) -> None:
    provider = files.provider
    await provider.write("user.city", "Lisbon", content_type="profile", metadata={"turn": 3})
    await provider.write("user.pet", "a cat called Miso", content_type="profile")
    await provider.write("trip.porto", "Trip to Porto on 12 June", content_type="event")
    await provider.write(
        "run",
        {"text": "went running", "kind": "activity", "importance": 0.4},
        content_type="activity",
    )


async def test_every_write_lands_in_its_category_file_with_its_event(files: Files) -> None:
    await seed(files)
    profile = (files.folder / "profile.md").read_text()
    assert profile.startswith("# profile\n")
    assert "## user.city\n" in profile
    assert "\nLisbon\n" in profile
    assert '"metadata": {"turn": 3}' in profile
    assert "\nwent running\n" in (files.folder / "activity.md").read_text()
    # Configured categories exist even when empty; others only while they hold memories.
    assert (files.folder / "goal.md").read_text() == "# goal\n\n"
    assert [kind for kind, _ in await files.events()] == ["memory.written"] * 4
    await files.provider.write("note", "scratch", content_type="scratch")
    assert (files.folder / "scratch.md").exists()
    await files.provider.delete("note")
    assert not (files.folder / "scratch.md").exists()
    assert (await files.events())[-1] == ("memory.deleted", "note")


async def test_hand_edits_become_events_and_rebuild_regenerates_the_files(files: Files) -> None:
    await seed(files)
    provider = files.provider
    profile = files.folder / "profile.md"
    text = profile.read_text()
    # Change a block's text, remove another, add one by hand (no engram line).
    text = text.replace("\nLisbon\n", "\nPorto\n")
    text = text[: text.index("## user.pet")]  # the last block of the file
    text += "## user.job\n\nnurse at the city hospital\n"
    profile.write_text(text)
    (files.folder / "event.md").unlink()  # removing a file removes its memories
    after = await files.position()

    report = await provider.rescan()

    assert (report.added, report.changed, report.removed) == (
        ["user.job"],
        ["user.city"],
        ["trip.porto", "user.pet"],
    )
    assert sorted(await files.events(after)) == [
        ("memory.deleted", "trip.porto"),
        ("memory.deleted", "user.pet"),
        ("memory.written", "user.city"),
        ("memory.written", "user.job"),
    ]
    city = await provider.read("user.city")
    assert city is not None
    assert city.value == "Porto"
    assert city.metadata == {"turn": 3}
    job = await provider.read("user.job")
    assert job is not None
    assert job.content_type == "profile"
    assert await provider.read("user.pet") is None
    assert [h.entry.key for h in await provider.search("hospital nurse")] == ["user.job"]
    # The files are rendered again in the canonical form; a second rescan finds nothing.
    rendered = snapshot(files.folder)
    assert "## user.job\n<!-- engram {" in rendered["profile.md"]
    assert (await provider.rescan()).edits == 0
    # Rebuilding from the log (files deleted or not) regenerates identical files.
    await provider.rebuild()
    assert snapshot(files.folder) == rendered
    shutil.rmtree(files.folder)
    await provider.rebuild()
    assert snapshot(files.folder) == rendered
    assert await files.events(await files.position()) == []


async def test_moving_a_block_to_another_file_changes_its_category(files: Files) -> None:
    await seed(files)
    profile, event = files.folder / "profile.md", files.folder / "event.md"
    text = profile.read_text()
    block = text[text.index("## user.pet") :]
    profile.write_text(text.replace(block, ""))
    event.write_text(event.read_text() + block)
    report = await files.provider.rescan()
    assert report.changed == ["user.pet"]
    moved = await files.provider.read("user.pet")
    assert moved is not None
    assert moved.content_type == "event"


async def test_a_file_behind_the_log_is_not_an_edit(files: Files) -> None:
    await seed(files)
    before = snapshot(files.folder)
    # Another writer of the namespace (or a render that failed after the commit) leaves the
    # files behind the records: a rescan renders them, it does not undo the write.
    plain = EventSourcedProvider(
        files.backend, ALICE, provider_id="files", spec=files.provider.spec
    )
    await plain.write("user.city", "Madrid", content_type="profile")
    assert snapshot(files.folder) == before
    report = await files.provider.rescan()
    assert report.edits == 0
    city = await files.provider.read("user.city")
    assert city is not None
    assert city.value == "Madrid"
    assert "\nMadrid\n" in (files.folder / "profile.md").read_text()


async def test_pending_edits_survive_a_write_to_the_same_file(files: Files) -> None:
    await seed(files)
    profile = files.folder / "profile.md"
    profile.write_text(profile.read_text().replace("\nLisbon\n", "\nBerlin\n"))
    await files.provider.write("user.age", 41, content_type="profile")
    city = await files.provider.read("user.city")
    assert city is not None
    assert city.value == "Berlin"
    text = profile.read_text()
    assert "\nBerlin\n" in text
    assert "## user.age\n" in text


async def test_a_broken_file_is_reported_and_kept_and_nothing_is_written(files: Files) -> None:
    await seed(files)
    profile = files.folder / "profile.md"
    broken = profile.read_text().replace('"metadata": {"turn": 3}', '"metadata": {"turn": 3')
    profile.write_text(broken)
    after = await files.position()
    with pytest.raises(MemoryFileError) as raised:
        await files.provider.rescan()
    assert raised.value.details["path"] == "profile.md"
    assert await files.events(after) == []
    # An agent's write still succeeds; the person's file is left for them to fix.
    await files.provider.write("user.age", 41, content_type="profile")
    assert profile.read_text() == broken
    profile.write_text(broken.replace('{"turn": 3', '{"turn": 4}'))
    assert (await files.provider.rescan()).changed == ["user.city"]
    assert "## user.age\n" in profile.read_text()


async def test_a_key_written_in_two_files_is_refused(files: Files) -> None:
    await seed(files)
    event = files.folder / "event.md"
    event.write_text(event.read_text() + "## user.city\n\nLondon\n")
    with pytest.raises(MemoryFileError, match="both"):
        await files.provider.rescan()


async def test_an_unreadable_baseline_reads_as_empty(files: Files) -> None:
    await seed(files)
    (files.folder / ".engram" / "profile.md").write_text("## k\n<!-- engram {broken -->\n")
    profile = files.folder / "profile.md"
    profile.write_text(profile.read_text().replace("\nLisbon\n", "\nPorto\n"))
    report = await files.provider.rescan()
    assert (report.added, report.changed, report.removed) == ([], ["user.city"], [])
    assert (await files.provider.rescan()).edits == 0


async def test_a_folder_removed_whole_is_rendered_again_by_rescan(files: Files) -> None:
    await seed(files)
    rendered = snapshot(files.folder)
    shutil.rmtree(files.folder)
    assert (await files.provider.rescan()).edits == 0
    assert snapshot(files.folder) == rendered
    empty = files.make(ALICE.model_copy(update={"user": "nobody"}))
    assert (await empty.rescan()).edits == 0
    assert not files.store.path(empty.scope).exists()


async def test_a_render_that_fails_after_the_commit_is_repaired_by_rescan(
    files: Files, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    await seed(files)
    before = snapshot(files.folder)

    def disk_full(folder: Any, texts: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(provider_module, "_write_all", disk_full)
    written = await files.provider.write("user.city", "Madrid", content_type="profile")
    assert written.value == "Madrid"  # acknowledged: it is in the log
    assert (await files.events())[-1] == ("memory.written", "user.city")
    assert "not rendered" in caplog.text
    assert snapshot(files.folder) == before  # the file is behind the log
    monkeypatch.undo()
    assert (await files.provider.rescan()).edits == 0  # behind is not an edit
    assert "\nMadrid\n" in (files.folder / "profile.md").read_text()
