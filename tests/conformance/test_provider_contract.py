"""The provider contract (rfc-2002 §5), run against every provider on every backend."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from engramdb.core.errors import (
    InvalidKeyError,
    InvalidValueError,
    ValidationError,
    ValueTooLargeError,
)
from engramdb.core.scope import Scope
from engramdb.core.types import MemoryTier, RecallResult, utc_now
from engramdb.index.embedder import Embedder
from engramdb.index.sentences import sentence_keys
from engramdb.providers.event_sourced import EventSourcedProvider, WriteRequest
from engramdb.providers.indexing import SearchRequest
from engramdb.storage.records import RecordQuery
from tests.conformance.conftest import SCOPE, ProviderKit


async def test_write_then_read_returns_the_same_entry(kit: ProviderKit) -> None:
    written = await kit.provider.write(
        "user.city", "Lisbon", content_type="profile", metadata={"source": "chat", "turn": 7}
    )
    read = await kit.provider.read("user.city")
    assert read == written
    assert read.value == "Lisbon"
    assert read.content_type == "profile"
    assert read.metadata == {"source": "chat", "turn": 7}
    assert read.provider_id == kit.provider.capabilities().provider_id
    assert read.created_at.tzinfo is not None
    assert read.updated_at is None


@pytest.mark.parametrize(
    "value",
    ["text", 42, 3.5, True, ["a", 1, None], {"nested": {"list": [1, 2]}, "ünï": "cødé"}],
)
async def test_json_values_round_trip(kit: ProviderKit, value: Any) -> None:
    await kit.provider.write("k", value)
    entry = await kit.provider.read("k")
    assert entry is not None
    assert entry.value == value
    assert type(entry.value) is type(value)


async def test_tuples_come_back_as_lists_in_write_and_read_alike(kit: ProviderKit) -> None:
    written = await kit.provider.write("k", (1, 2))
    assert written.value == [1, 2]
    read = await kit.provider.read("k")
    assert read is not None
    assert read.value == [1, 2]


async def test_overwrite_keeps_created_at_and_sets_updated_at(kit: ProviderKit) -> None:
    first = await kit.provider.write("k", "one")
    second = await kit.provider.write("k", "two", content_type="event")
    assert second.created_at == first.created_at
    assert second.updated_at is not None
    assert second.updated_at >= first.created_at
    read = await kit.provider.read("k")
    assert read == second
    assert read.value == "two"
    assert read.content_type == "event"


async def test_read_of_missing_key_is_none(kit: ProviderKit) -> None:
    assert await kit.provider.read("missing") is None


async def test_delete_reports_whether_the_key_was_there(kit: ProviderKit) -> None:
    await kit.provider.write("k", "v")
    assert await kit.provider.delete("k") is True
    assert await kit.provider.read("k") is None
    assert await kit.provider.delete("k") is False


async def test_list_keys_is_sorted_and_filters(kit: ProviderKit) -> None:
    await kit.provider.write("b.two", 2, content_type="fact")
    await kit.provider.write("a.one", 1, content_type="profile")
    await kit.provider.write("b.three", 3, content_type="event")
    assert await kit.provider.list_keys() == ["a.one", "b.three", "b.two"]
    assert await kit.provider.list_keys(prefix="b.") == ["b.three", "b.two"]
    assert await kit.provider.list_keys(content_types=["profile", "event"]) == ["a.one", "b.three"]
    assert await kit.provider.list_keys(prefix="zzz") == []


async def test_search_ranks_by_relevance_within_zero_and_one(kit: ProviderKit) -> None:
    caps = kit.provider.capabilities()
    if not caps.supports_search:
        pytest.skip(f"{caps.provider_id} declares no search")
    await kit.provider.write("home", "the user lives in Lisbon near the river")
    await kit.provider.write("job", "the user works as a nurse in Lisbon")
    await kit.provider.write("pet", "a dog called Rex")
    hits = await kit.provider.search("lives in Lisbon")
    assert [h.entry.key for h in hits][:2] == ["home", "job"]
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    assert hits[0].score > hits[1].score
    if kit.name == "indexed":
        # Vector search returns nearest neighbours: an unrelated entry may come last.
        assert "pet" not in [h.entry.key for h in hits][:2]
    else:
        assert "pet" not in [h.entry.key for h in hits]
    assert all(h.tier is caps.tier for h in hits)
    assert len(await kit.provider.search("lisbon", limit=1)) == 1


async def test_an_indexed_record_is_scored_by_its_best_sentence(
    kit: ProviderKit, embedder: Embedder
) -> None:
    provider = kit.provider
    if not isinstance(provider, EventSourcedProvider) or provider.spec.embed_parts is None:
        pytest.skip("sentence vectors belong to indexed providers")
    turn = (
        "We spent the evening comparing tax software and the filing deadlines. "
        "By the way, my sister Maria moved to Porto in June. "
        "Anyway, which deduction forms do I still need?"
    )
    await provider.write("turn", turn)
    await provider.write("hike", "I like hiking in the mountains on weekends.")
    question = "Which city did my sister move to?"
    hits = await provider.search_hits(SearchRequest(question, limit=2))
    assert hits[0].record.key == "turn"
    texts = [turn, *sentence_keys(turn)]
    vectors = await embedder.embed([question, *texts])
    best = float((vectors[1:] @ vectors[0]).max())
    assert len(texts) == 4
    assert best > float(vectors[1] @ vectors[0])  # a sentence, not the whole turn, wins
    assert hits[0].breakdown["vector"] == pytest.approx(best, abs=1e-4)
    everything = RecordQuery(provider.provider_id, provider.partition)
    search = provider.backend.search
    stored = await search.vector_sets(everything, provider.indexer.model)
    assert {key: len(blob) // (4 * embedder.dimensions) for key, blob in stored.items()} == {
        hits[0].record.id: 4,
        hits[1].record.id: 1,
    }
    turn_id = hits[0].record.id
    assert turn_id is not None
    parts = await search.part_vectors(everything, provider.indexer.model)
    assert parts == {turn_id: stored[turn_id][4 * embedder.dimensions :]}
    # A rebuild from the log keeps the vectors of unchanged texts, sentences included.
    await provider.rebuild()
    assert sorted((await search.vector_sets(everything, provider.indexer.model)).values()) == (
        sorted(stored.values())
    )
    # Deleted for good: no vector of the record is left to find.
    await provider.delete("turn")
    assert len(await search.vector_sets(everything, provider.indexer.model)) == 1


async def test_search_filters_by_content_type_and_metadata(kit: ProviderKit) -> None:
    if not kit.provider.capabilities().supports_search:
        pytest.skip("no search")
    await kit.provider.write("a", "coffee order", content_type="fact", metadata={"n": 1})
    await kit.provider.write("b", "coffee beans", content_type="event", metadata={"n": True})
    await kit.provider.write("c", "coffee shop", content_type="fact", metadata={"n": "1"})
    await kit.provider.write("d", "coffee cup", metadata={"tags": ["x", "y"], "n": None})

    def keys(hits: list[RecallResult]) -> list[str]:
        return sorted(h.entry.key for h in hits)

    assert keys(await kit.provider.search("coffee", content_types=["event"])) == ["b"]
    assert keys(await kit.provider.search("coffee", metadata_filters={"n": 1})) == ["a"]
    assert keys(await kit.provider.search("coffee", metadata_filters={"n": True})) == ["b"]
    assert keys(await kit.provider.search("coffee", metadata_filters={"n": "1"})) == ["c"]
    assert keys(await kit.provider.search("coffee", metadata_filters={"n": None})) == ["d"]
    tags = {"tags": ["x", "y"]}
    assert keys(await kit.provider.search("coffee", metadata_filters=tags)) == ["d"]


async def test_search_keeps_what_happened_within_since_and_until(kit: ProviderKit) -> None:
    if not kit.provider.capabilities().supports_search:
        pytest.skip("no search")
    before = utc_now() - timedelta(minutes=5)
    await kit.provider.write("a", "coffee order")
    after = utc_now() + timedelta(minutes=5)
    within = await kit.provider.search("coffee", since=before, until=after)
    assert [h.entry.key for h in within] == ["a"]
    assert await kit.provider.search("coffee", since=after) == []
    assert await kit.provider.search("coffee", until=before) == []


async def test_ttl_expired_entries_are_never_returned(kit: ProviderKit) -> None:
    written = await kit.provider.write("short", "fleeting thought", ttl_ms=300)
    assert written.expires_at is not None
    assert written.expires_at - written.created_at == timedelta(milliseconds=300)
    await kit.provider.write("long", "lasting thought")
    await asyncio.sleep(max(0.0, (written.expires_at - utc_now()).total_seconds()) + 0.01)
    assert await kit.provider.read("short") is None
    assert await kit.provider.list_keys() == ["long"]
    if kit.provider.capabilities().supports_search:
        assert [h.entry.key for h in await kit.provider.search("thought")] == ["long"]


@pytest.mark.parametrize(
    ("key", "value", "options", "error"),
    [
        ("", "v", {}, InvalidKeyError),
        (" padded", "v", {}, InvalidKeyError),
        ("trailing\n", "v", {}, InvalidKeyError),
        ("line\nbreak", "v", {}, InvalidKeyError),
        ("x" * 513, "v", {}, InvalidKeyError),
        (7, "v", {}, InvalidKeyError),
        ("k", None, {}, InvalidValueError),
        ("k", {1, 2}, {}, InvalidValueError),
        ("k", float("nan"), {}, InvalidValueError),
        ("k", object(), {}, InvalidValueError),
        ("k", "x" * 1_048_577, {}, ValueTooLargeError),
        ("k", "v", {"metadata": {"bad": object()}}, InvalidValueError),
        ("k", "v", {"metadata": {1: "int key"}}, InvalidValueError),
        ("k", "v", {"content_type": "Not A Type"}, InvalidValueError),
        ("k", "v", {"ttl_ms": 0}, InvalidValueError),
        ("k", "v", {"ttl_ms": "soon"}, InvalidValueError),
    ],
)
async def test_bad_input_is_a_typed_error_and_changes_nothing(
    kit: ProviderKit, key: Any, value: Any, options: dict[str, Any], error: type[Exception]
) -> None:
    await kit.provider.write("k", "original")
    before = await kit.provider.read("k")
    with pytest.raises(error) as raised:
        await kit.provider.write(key, value, **options)
    assert isinstance(raised.value, ValidationError)
    assert await kit.provider.read("k") == before
    assert await kit.provider.list_keys() == ["k"]


async def test_scopes_are_isolated(kit: ProviderKit) -> None:
    other_tenant = kit.make(Scope(tenant="globex", user="alice", agent="helper", session="s-1"))
    other_user = kit.make(SCOPE.model_copy(update={"user": "bob"}))
    await kit.provider.write("secret", "acme alice secret")
    await other_tenant.write("secret", "globex secret")
    assert (await kit.provider.read("secret")).value == "acme alice secret"  # type: ignore[union-attr]
    assert (await other_tenant.read("secret")).value == "globex secret"  # type: ignore[union-attr]
    assert await other_user.read("secret") is None
    assert await other_user.list_keys() == []
    if kit.provider.capabilities().supports_search:
        assert await other_user.search("secret") == []
    assert await other_user.delete("secret") is False
    assert await kit.provider.read("secret") is not None


async def test_persistent_memory_outlives_the_session(kit: ProviderKit) -> None:
    next_session = kit.make(SCOPE.model_copy(update={"session": "s-2"}))
    await kit.provider.write("user.city", "Lisbon")
    found = await next_session.read("user.city")
    if kit.provider.capabilities().tier is MemoryTier.WORKING:
        assert found is None, "working memory is per session"
    else:
        assert found is not None
        assert found.value == "Lisbon"


async def test_rebuild_keeps_what_reads_list_and_search_return(kit: ProviderKit) -> None:
    provider = kit.provider
    await provider.write("a", "alpha memory", metadata={"i": 1})
    await provider.write("b", "beta memory", content_type="event")
    await provider.write("a", "alpha memory, revised")
    await provider.write("c", "gamma memory")
    await provider.delete("c")
    before = (
        [await provider.read(k) for k in ("a", "b", "c")],
        await provider.list_keys(),
        await provider.search("memory") if provider.capabilities().supports_search else [],
    )
    await provider.rebuild()
    after = (
        [await provider.read(k) for k in ("a", "b", "c")],
        await provider.list_keys(),
        await provider.search("memory") if provider.capabilities().supports_search else [],
    )
    assert after == before


async def test_upsert_similar_updates_a_near_duplicate_and_creates_otherwise(
    kit: ProviderKit,
) -> None:
    provider = kit.provider
    if not isinstance(provider, EventSourcedProvider):
        pytest.skip("upsert with a dedupe threshold is a persistent-provider operation")
    fact = "Python was created by Guido van Rossum."
    first, status = await provider.upsert_similar(WriteRequest("f1", fact), 0.95)
    assert (first.key, status) == ("f1", "created")
    again, status = await provider.upsert_similar(WriteRequest("f2", fact), 0.95)
    assert (again.key, status) == ("f1", "updated")
    assert again.created_at == first.created_at
    other, status = await provider.upsert_similar(
        WriteRequest("f3", "The Eiffel Tower is in Paris."), 0.95
    )
    assert (other.key, status) == ("f3", "created")
    assert await provider.list_keys() == ["f1", "f3"]
    with pytest.raises(ValidationError):
        await provider.upsert_similar(WriteRequest("f4", fact), 1.5)
    if kit.name == "indexed":
        near, status = await provider.upsert_similar(
            WriteRequest("f5", "Guido van Rossum created Python."), 0.8
        )
        assert (near.key, status) == ("f1", "updated")
