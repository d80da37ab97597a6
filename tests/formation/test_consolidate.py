"""Consolidation of extracted items into semantic memory: add, update with history and
validity, no-op, end of validity, contradiction, similarity, and ``as_of``."""

from __future__ import annotations

from datetime import UTC, datetime

from engramdb.engine import Engine, ScopedMemory
from engramdb.formation.consolidate import Consolidator
from engramdb.formation.types import ExtractedItem, Operation

T1 = datetime(2024, 1, 10, tzinfo=UTC)
T2 = datetime(2024, 6, 1, tzinfo=UTC)
T3 = datetime(2024, 9, 1, tzinfo=UTC)


def fact(
    value: str,
    at: datetime,
    key: str = "user.city",
    operation: Operation = "set",
    source: str = "t1",
) -> ExtractedItem:
    text = f"The user lives in {value}." if operation == "set" else f"Left {value}."
    return ExtractedItem("profile", key, value, text, (source,), at, operation, "lives_in")


def scoped(engine: Engine) -> ScopedMemory:
    return engine.scope(tenant="t", user="u")


async def test_add_then_unchanged(engine: Engine) -> None:
    mem = scoped(engine)
    consolidator = Consolidator(mem.semantic)
    assert (await consolidator.consolidate(fact("Lisbon", T1))).decision == "added"
    again = await consolidator.consolidate(fact("lisbon", T2, source="t2"))
    assert (again.decision, again.note) == ("unchanged", "already known")
    (stored,) = await mem.semantic.history("user.city")
    assert stored.metadata["sources"] == ["t1"]
    assert stored.valid_from == T1
    assert stored.kind == "profile"


async def test_update_keeps_history_with_validity(engine: Engine) -> None:
    mem = scoped(engine)
    consolidator = Consolidator(mem.semantic)
    await consolidator.consolidate(fact("Lisbon", T1))
    outcome = await consolidator.consolidate(fact("Berlin", T2, source="t2"))
    assert (outcome.decision, outcome.previous) == ("updated", "Lisbon")
    current, old = await mem.semantic.history("user.city")
    assert (current.text, current.valid_from, current.valid_to) == (
        "The user lives in Berlin.",
        T2,
        None,
    )
    assert (old.text, old.superseded, old.valid_from, old.valid_to) == (
        "The user lives in Lisbon.",
        True,
        T1,
        T2,
    )
    found = await mem.semantic.remember("where does the user live?")
    assert [i.text for i in found if i.key == "user.city"] == ["The user lives in Berlin."]
    then = await mem.semantic.remember(
        "where does the user live?", as_of=datetime(2024, 3, 1, tzinfo=UTC)
    )
    assert [i.text for i in then] == ["The user lives in Lisbon."]
    before = await mem.semantic.remember(
        "where does the user live?", as_of=datetime(2023, 1, 1, tzinfo=UTC)
    )
    assert before == []


async def test_end_of_validity(engine: Engine) -> None:
    mem = scoped(engine)
    consolidator = Consolidator(mem.semantic)
    await consolidator.consolidate(fact("Acme", T1, key="user.employer"))
    other = await consolidator.consolidate(fact("Initech", T2, "user.employer", "end", "t2"))
    assert (other.decision, other.note) == (
        "unchanged",
        "nothing to end: the stored value is 'Acme'",
    )
    ended = await consolidator.consolidate(fact("Acme", T2, "user.employer", "end", "t3"))
    assert ended.decision == "ended"
    latest, _ = await mem.semantic.history("user.employer")
    assert (latest.valid_from, latest.valid_to) == (T1, T2)
    assert latest.metadata["ended_by"] == ["t3"]
    assert await mem.semantic.remember("where does the user work?") == []
    past = await mem.semantic.remember("where does the user work?", history=True)
    assert past[0].text == "The user lives in Acme."  # the fact's own sentence, ended
    during = await mem.semantic.remember("user employer", as_of=datetime(2024, 3, 1, tzinfo=UTC))
    assert [i.valid_to for i in during] == [T2]
    again = await consolidator.consolidate(fact("Acme", T3, "user.employer", "end", "t4"))
    assert again.note == "nothing to end: it had already ended"


async def test_an_end_said_when_the_fact_began_ends_nothing(engine: Engine) -> None:
    consolidator = Consolidator(scoped(engine).semantic)
    await consolidator.consolidate(fact("Acme", T1, key="user.employer"))
    same_time = await consolidator.consolidate(fact("Acme", T1, "user.employer", "end", "t2"))
    assert (same_time.decision, same_time.note) == (
        "unchanged",
        "nothing to end: it was stated as holding from then on",
    )


async def test_end_of_an_unknown_fact_is_stored_as_past(engine: Engine) -> None:
    mem = scoped(engine)
    outcome = await Consolidator(mem.semantic).consolidate(fact("Acme", T2, "user.employer", "end"))
    assert outcome.decision == "added"
    (stored,) = await mem.semantic.history("user.employer")
    assert (stored.valid_from, stored.valid_to) == (None, T2)


async def test_contradiction_at_the_same_time_keeps_both(engine: Engine) -> None:
    mem = scoped(engine)
    consolidator = Consolidator(mem.semantic)
    await consolidator.consolidate(fact("Lisbon", T1))
    outcome = await consolidator.consolidate(fact("Porto", T1, source="t2"))
    assert outcome.decision == "contradicted"
    assert outcome.key.startswith("user.city.")
    first = (await mem.semantic.history("user.city"))[0]
    second = (await mem.semantic.history(outcome.key))[0]
    assert first.metadata["conflicts_with"] == outcome.key
    assert second.metadata["conflicts_with"] == "user.city"
    texts = {i.text for i in await mem.semantic.remember("where does the user live?")}
    assert {"The user lives in Lisbon.", "The user lives in Porto."} <= texts


async def test_an_older_statement_becomes_history(engine: Engine) -> None:
    mem = scoped(engine)
    consolidator = Consolidator(mem.semantic)
    await consolidator.consolidate(fact("Berlin", T2))
    outcome = await consolidator.consolidate(fact("Lisbon", T1, source="t0"))
    assert outcome.decision == "superseded"
    (past,) = await mem.semantic.history(outcome.key)
    assert (past.valid_from, past.valid_to) == (T1, T2)
    current = await mem.semantic.remember("where does the user live?")
    assert [i.text for i in current if i.key and i.key.startswith("user.city")] == [
        "The user lives in Berlin."
    ]


async def test_similar_activity_keys_match(engine: Engine) -> None:
    mem = scoped(engine)
    consolidator = Consolidator(mem.semantic)

    def activity(key: str, source: str, at: datetime) -> ExtractedItem:
        words = key.split(".")[1].replace("_", " ")
        return ExtractedItem("activity", key, words, f"The user is {words}.", (source,), at)

    await consolidator.consolidate(activity("activity.learning_portuguese_at_night", "a", T1))
    outcome = await consolidator.consolidate(
        activity("activity.learning_portuguese_at_night_again", "b", T2)
    )
    assert (outcome.key, outcome.decision) == ("activity.learning_portuguese_at_night", "updated")
    other = await consolidator.consolidate(activity("activity.playing_chess", "c", T2))
    assert (other.key, other.decision) == ("activity.playing_chess", "added")
