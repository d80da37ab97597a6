"""Formation end to end, without an LLM, on both storage backends: three sessions in which
the user states a city, an employer, a pet and a dated plan, then moves and changes jobs."""

from __future__ import annotations

from datetime import UTC, datetime

from engramdb.engine import Engine

S1 = datetime(2024, 3, 4, 10, 0, tzinfo=UTC)  # a Monday
S2 = datetime(2024, 5, 13, 9, 0, tzinfo=UTC)  # a Monday
S3 = datetime(2024, 9, 2, 18, 0, tzinfo=UTC)

CONVERSATION = [
    {"session_id": "s1", "timestamp": S1, "role": "user",
     "content": "Hi! My name is Ana. I live in Lisbon and I work at Acme."},
    {"session_id": "s1", "timestamp": S1, "role": "assistant",
     "content": "Nice to meet you, Ana. What do you do at Acme?"},
    {"session_id": "s1", "timestamp": S1, "role": "user",
     "content": "I'm a designer. My dog Rex comes to the office with me."},
    {"session_id": "s2", "timestamp": S2, "role": "user",
     "content": "I'm going to fly to Paris next Friday for a design conference."},
    {"session_id": "s2", "timestamp": S2, "role": "assistant",
     "content": "Have a great trip! Paris is lovely in May."},
    {"session_id": "s3", "timestamp": S3, "role": "user",
     "content": "Big news: I moved to Berlin last month."},
    {"session_id": "s3", "timestamp": S3, "role": "user",
     "content": "I left Acme, and I work for Globex now."},
]  # fmt: skip


async def test_three_sessions(any_engine: Engine) -> None:
    mem = any_engine.scope(tenant="acme", user="ana")
    report = await mem.ingest(CONVERSATION)
    assert report.episodes == len(CONVERSATION)
    profile = report.categories["profile"]
    # "I left Acme" ends the employer, then "I work for Globex" replaces it.
    assert (profile.added, profile.updated, profile.ended, profile.superseded) == (4, 2, 1, 3)
    assert report.categories["event"].added == 2  # the plan, and the move

    # The profile holds the current city and employer; the old ones are history with validity.
    city = await mem.semantic.history("user.city")
    assert [(v.text, v.valid_from, v.valid_to, v.superseded) for v in city] == [
        ("The user lives in Berlin.", S3, None, False),
        ("The user lives in Lisbon.", S1, S3, True),
    ]
    employer = await mem.semantic.history("user.employer")
    assert [(v.text, v.valid_from, v.valid_to) for v in employer] == [
        ("The user works at Globex.", S3, None),
        ("The user works at Acme.", S1, S3),  # ended by "I left Acme"
        ("The user works at Acme.", S1, S3),  # as first stated
    ]
    assert employer[1].metadata["ended_by"] == ["s3:1"]

    # remember: the current city first; with history, the old one follows.
    found = await mem.semantic.remember("where does the user live?")
    assert found[0].text == "The user lives in Berlin."
    assert "The user lives in Lisbon." not in [i.text for i in found]
    with_history = await mem.semantic.remember("where does the user live?", history=True)
    texts = [i.text for i in with_history]
    assert texts[:2] == ["The user lives in Berlin.", "The user lives in Lisbon."]
    assert with_history[1].superseded
    then = await mem.semantic.remember(
        "where does the user live?", as_of=datetime(2024, 6, 1, tzinfo=UTC)
    )
    assert then[0].text == "The user lives in Lisbon."

    # The event has its resolved date ("next Friday" said on Monday 2024-05-13), in assemble too.
    (plan,) = [o for o in report.outcomes if o.item.pattern == "plan"]
    assert plan.item.starts == datetime(2024, 5, 17, tzinfo=UTC)
    stored = (await mem.semantic.history(plan.key))[0]
    assert stored.text == (
        "The user plans to fly to Paris for a design conference on Friday 2024-05-17."
    )
    assert stored.metadata["starts"] == "2024-05-17T00:00:00+00:00"
    context = await mem.assemble("when is the user's trip to Paris?", token_limit=800)
    assert "2024-05-17" in context.text

    # Every item names its source turns; the facts keep them in their metadata.
    assert all(o.item.sources for o in report.outcomes)
    sources = {o.key: o.item.sources for o in report.outcomes}
    assert sources["user.pet.rex"] == ("s1:2",)
    assert city[0].metadata["sources"] == ["s3:0"]
    assert city[1].metadata["sources"] == ["s1:0"]

    # The graph holds the entities and relations, with their provenance.
    hits = await mem.graph.search("Rex")
    assert hits[0].entry.value["name"] == "Rex"
    assert hits[0].entry.value["sources"] == ["episodic:s1:2"]
    ana = await mem.graph.find_entity("ana", "person")
    assert ana is not None
    held = await mem.graph.get_relations(ana.entity_id)
    names = {}
    for relation in held:
        target = await mem.graph.get_entity(relation.target_id)
        assert target is not None
        names[relation.relation_type] = target.name
        assert relation.sources
    assert names == {"lives_in": "Berlin", "works_for": "Globex", "has_pet": "Rex"}
    everything = await mem.graph.get_relations(ana.entity_id, history=True)
    old = [r for r in everything if r.relation_type == "works_for" and r.invalid_at is not None]
    assert [(r.valid_at, r.invalid_at, r.sources) for r in old] == [(S1, S3, ["episodic:s1:0"])]

    # Formed again from the same turns, nothing changes.
    again = await mem.ingest(CONVERSATION)
    assert {o.decision for o in again.outcomes} == {"unchanged"}
