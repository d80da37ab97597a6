"""Full-text hits on LongMemEval_S haystacks, to tell whether a change of the full-text path
changes them: each of the first N questions' haystack (every turn, both roles) in a partition
of its own, then the full-text part of ``remember`` for its question (the words kept after
pruning, then the backend's ``search.text``, 50 hits). Writes each question's words and hits
(key, score) as JSON, and where the backend prunes the words in its search statement itself,
whether that finds the same; ``--against`` compares with an earlier run's file. On PostgreSQL (the
default) the script creates its own database on the server and drops it afterwards; with
``--sqlite FILE`` it stores the haystacks in that file (replaced) instead. Run by hand (not in
CI)::

    python bench/bench_text_hits_longmemeval.py --out before.json
    python bench/bench_text_hits_longmemeval.py --out after.json --against before.json
    python bench/bench_text_hits_longmemeval.py --sqlite /tmp/hits.db --out sqlite.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import lzma
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from engramdb.core.scope import Scope
from engramdb.providers.indexing import Indexer
from engramdb.storage.records import Put, Record, RecordQuery
from engramdb.storage.registry import open_backend
from engramdb.storage.search_backend import BestHits, SearchesReadBestHits

SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
DATA = Path("/work/shared/eval/data/longmemeval_s_cleaned.json.xz")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def turns(item: dict[str, Any]) -> list[Put]:
    """A question's haystack as records of a partition of its own."""
    scope = Scope(tenant="longmemeval", user=str(item["question_id"]))
    return [
        Put(Record("episodic", scope, f"{s}:{t}", {"text": text}, "turn", {}, T0, text=text))
        for s, session in enumerate(item["haystack_sessions"])
        for t, turn in enumerate(session)
        for text in [str(turn["content"]).replace("\x00", "")]
    ]


async def run(
    target: str | Path, items: Sequence[dict[str, Any]], bound: int | None = None
) -> list[dict[str, Any]]:
    """Store every haystack in the store at ``target``, then ask each question of its own
    (each word scored in at most its ``bound`` newest records, when given)."""
    backend = await open_backend(target)
    if bound is not None:
        backend.search.scored_per_word = bound
    try:
        for item in items:
            puts = turns(item)
            for at in range(0, len(puts), 500):
                await backend.commit(puts[at : at + 500], [])
        indexer = Indexer(backend)
        answers = []
        for item in items:
            scope = Scope(tenant="longmemeval", user=str(item["question_id"]))
            match = await indexer.full_text_match(str(item["question"]), "episodic", scope)
            query = RecordQuery("episodic", scope, alive_at=datetime.now(UTC))
            hits = await backend.search.text(query, match, 50) if match else []
            answer = {
                "question": item["question_id"],
                "records": len(turns(item)),
                "match": match,
                "hits": [[r.key, score] for r, score in hits],
            }
            # A backend that prunes the words in its search statement must find the same.
            terms = indexer.full_text_terms(str(item["question"]))
            rule = indexer.word_pruning(terms)
            if rule is not None and isinstance(backend.search, SearchesReadBestHits):
                found = BestHits(None, 50, every_record=True)
                pruned = await backend.search.text_pruned(query, terms, rule, 50, found)
                if pruned is not None:
                    taken = found.take(i for i, _ in pruned)
                    answer["pruned_hits"] = [[taken[i].key, s] for i, s in pruned]
            answers.append(answer)
        return answers
    finally:
        await backend.close()


def on_postgres(
    database: str, items: Sequence[dict[str, Any]], bound: int | None
) -> list[dict[str, Any]]:
    """``run`` on a database created on the server for it, and dropped after."""
    name = sql.Identifier(database)
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    try:
        return asyncio.run(run(f"postgresql://postgres@127.0.0.1:5432/{database}", items, bound))
    finally:
        with psycopg.connect(SERVER, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))


def compare(now: list[dict[str, Any]], before: list[dict[str, Any]]) -> str:
    """How many questions kept the same words, the same hit keys and the same scores."""
    pairs = list(zip(now, before, strict=True))
    words = sum(a["match"] == b["match"] for a, b in pairs)
    keys = sum([h[0] for h in a["hits"]] == [h[0] for h in b["hits"]] for a, b in pairs)
    same = sum(a["hits"] == b["hits"] for a, b in pairs)
    return (
        f"{len(pairs)} questions: same words {words}, same hits in the same order {keys}, "
        f"same hits and scores {same}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--database", default="engram_bench_text_hits")
    parser.add_argument("--sqlite", type=Path, help="store in this SQLite file instead")
    parser.add_argument(
        "--scored-per-word", type=int, help="a word's newest records scored at most (a test)"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--against", type=Path, help="an earlier run's --out file")
    args = parser.parse_args(argv)
    with lzma.open(args.data, "rt", encoding="utf-8") as handle:
        items = json.load(handle)[: args.questions]
    if args.sqlite:
        args.sqlite.unlink(missing_ok=True)
        answers = asyncio.run(run(args.sqlite, items, args.scored_per_word))
    else:
        answers = on_postgres(args.database, items, args.scored_per_word)
    args.out.write_text(json.dumps(answers, indent=1))
    sizes = [a["records"] for a in answers]
    print(f"{len(answers)} partitions of {min(sizes)} to {max(sizes)} records")
    pruned = [a for a in answers if "pruned_hits" in a]
    if pruned:
        same = sum(a["pruned_hits"] == a["hits"] for a in pruned)
        print(
            f"pruned in the search statement: {len(pruned)} questions, same hits and scores {same}"
        )
    if args.against:
        print(compare(answers, json.loads(args.against.read_text())))


if __name__ == "__main__":
    main()
