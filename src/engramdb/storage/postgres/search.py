"""Search primitives of the PostgreSQL backend: Okapi BM25 over ``tsvector``s (GIN-indexed),
stored pgvector embeddings, and a conversation's neighbouring turns. Ranking itself happens
above, in pure functions; ``nearest`` additionally answers a cosine query through the HNSW
index inside the database."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

from engramdb.core.events import EventEnvelope
from engramdb.core.scope import Scope
from engramdb.storage.postgres.connection import Connection, PostgresPool, Read
from engramdb.storage.postgres.event_store import hold_writers, insert_events
from engramdb.storage.postgres.indexes import VectorIndexes
from engramdb.storage.postgres.queries import (
    EXACT_NEAREST_UP_TO,
    PARTITION,
    PARTITION_TERM_COUNTS,
    PARTITION_WORD_KEYS,
    PARTITION_WORD_MATCH,
    VectorSets,
    any_word,
    keyed_vector_select,
    match_words,
    nearest_select,
    part_vector_select,
    record_select,
    record_select_list,
    text_search,
    unvectored_select,
    vector_select,
    vector_set_select,
    word_phrase,
)
from engramdb.storage.postgres.schema import RECORD_TABLES, TEXT_CONFIG, table_for
from engramdb.storage.postgres.tenancy import ADMIN, NOBODY, Context, context_for, tenant_uuid
from engramdb.storage.postgres.vectors import StoredVector
from engramdb.storage.postgres.word_pruning import prunable, pruned_text_search
from engramdb.storage.records import Record, RecordQuery
from engramdb.storage.rows import row_record, time_text
from engramdb.storage.search_backend import SCORED_PER_WORD, BestHits, WordPruning

#: The models of each table's lowest and highest vectored record id (index ``<table>_vectored``).
EDGE_VECTOR_MODELS = " UNION ".join(
    f"(SELECT embedding_model FROM {table} WHERE embedding_model IS NOT NULL "
    f"ORDER BY id {order} LIMIT 1)"
    for table in RECORD_TABLES
    for order in ("ASC", "DESC")
)
#: Which tables hold any of some record ids (ids come from one sequence shared by all).
_TABLES_OF_IDS = " UNION ALL ".join(
    f"(SELECT '{table}' FROM {table} WHERE id = ANY(%(ids)s) LIMIT 1)" for table in RECORD_TABLES
)


async def _word_keys(conn: Connection, namespace: str, scope: Scope, text: str) -> list[str]:
    """The keys of ``text``'s words in the partition's words index. The counting statement is
    then planned for these very keys (a custom plan each time: a generic one cannot know how
    few records hold them, and would rather filter every row of the partition)."""
    await conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
    cursor = await conn.execute(PARTITION_WORD_KEYS, (namespace, *scope.columns(), text))
    row = await cursor.fetchone()
    return list(row[0]) if row and row[0] else []


async def _phrase_count(conn: Connection, namespace: str, scope: Scope, term: str) -> int:
    """How many of the partition's records hold ``term``'s words as a phrase."""
    keys = await _word_keys(conn, namespace, scope, term)
    cursor = await conn.execute(
        f"SELECT count(*) FROM {table_for(namespace)} WHERE {PARTITION} "
        f"AND {PARTITION_WORD_MATCH} AND tsv @@ websearch_to_tsquery('{TEXT_CONFIG}', %s)",
        (namespace, *scope.columns(), keys, word_phrase(term)),
    )
    row = await cursor.fetchone()
    return int(row[0]) if row else 0


def _best_hits(rows: list[Any], found: BestHits) -> list[tuple[int, float]]:
    """Hits from rows laid out as ``VectorSets`` says, whose records and vector sets go into
    ``found``."""
    for row in rows:
        record_id = int(row[0])
        if row[4] and found.model is not None:
            # Read in binary: the vector is already float32 bytes (``VectorLoader``).
            found.sets[record_id] = None if row[2] is None else row[2] + (row[3] or b"")
        if row[5] is not None:
            found.rows[record_id] = row[5:]
    return [(int(row[0]), float(row[1])) for row in rows]


#: The setting of a read's transaction that keeps the plan its statement was prepared with.
_GENERIC_PLAN = Read("SELECT set_config('plan_cache_mode', 'force_generic_plan', true)")


async def _with_kept_plan(pool: PostgresPool, context: Context, read: Read) -> list[Any]:
    """The rows of ``read``, prepared and planned once per connection for any parameters (a
    generic plan), rather than planned afresh on each of its first runs on every pooled
    connection: a full-text statement's planning takes longer than its run. Its plan walks
    each word's postings whatever the words (the server itself keeps it once it has seen a
    few runs)."""
    async with pool.reads(context) as reads:
        return (await reads.run([_GENERIC_PLAN, replace(read, prepare=True)], last=True))[-1]


#: The planner settings that, turned off, leave a nearest-vector query only the HNSW index.
_EXACT_PLANS = ("enable_seqscan", "enable_bitmapscan", "enable_sort")


class PostgresSearch:
    """Candidate retrieval for hybrid recall, one pooled transaction per call."""

    #: ``text`` joins the final page to its records in the same statement (``text_ids`` too).
    text_hits_include_records: Literal[True] = True

    def __init__(self, pool: PostgresPool, indexes: VectorIndexes) -> None:
        self._pool = pool
        self._indexes = indexes
        #: Who reads across tenants for the models of stored vectors: the admin role reads
        #: every tenant's records; a login without it reads none, which only turns off the
        #: start-up model check.
        self.statistics = ADMIN
        #: Search vectors through the HNSW index even where the planner would rather scan the
        #: table exactly (it does for small tables): approximate search on small data.
        self.prefer_index = False
        #: How many of a word's newest records a one-partition full-text query scores at most.
        self.scored_per_word = SCORED_PER_WORD
        #: A partition of at most this many records is searched for nearest vectors exactly.
        self.exact_nearest_up_to = EXACT_NEAREST_UP_TO

    async def text(self, query: RecordQuery, match: str, limit: int) -> list[tuple[Record, float]]:
        """Records ``query`` selects holding any word of the full-text expression ``match``,
        best first, with their BM25 scores (higher is better)."""
        rows = await self._text_rows(query, match, limit, None)
        return [(row_record(row[:-1]), float(row[-1])) for row in rows]

    async def text_best(
        self, query: RecordQuery, match: str, limit: int, found: BestHits
    ) -> list[tuple[int, float]]:
        """``text_ids``; the best hits' records and vector sets go into ``found``."""
        sets = VectorSets(found.model, found.best, found.every_record)
        return _best_hits(await self._text_rows(query, match, limit, sets), found)

    async def text_pruned(
        self,
        query: RecordQuery,
        terms: Sequence[str],
        rule: WordPruning,
        limit: int,
        found: BestHits,
    ) -> list[tuple[int, float]] | None:
        """See ``SearchesReadBestHits``: one round trip, for terms of one word each
        (``word_pruning.prunable``) in one partition."""
        scope = query.scope
        if not isinstance(scope, Scope) or not prunable(terms) or limit <= 0:
            return None
        tenant = tenant_uuid(scope.tenant)
        sets = VectorSets(found.model, found.best, found.every_record)
        sql, params = pruned_text_search(
            query, terms, rule, limit, tenant, self.scored_per_word, sets
        )
        read = Read(sql, params, binary=True)
        rows = await _with_kept_plan(self._pool, context_for([scope]), read)
        # A term whose frequency the statement cannot know makes it keep no word and find
        # nothing: only then is it asked whether that was the reason.
        if not rows and await self._some_frequency_unknown(query.namespace, scope, terms):
            return None
        return _best_hits(rows, found)

    async def _some_frequency_unknown(
        self, namespace: str, scope: Scope, terms: Sequence[str]
    ) -> bool:
        """Whether ``PARTITION_TERM_COUNTS`` knows no frequency for some of ``terms``."""
        partition = (tenant_uuid(scope.tenant), namespace, *scope.columns())
        counted = Read(PARTITION_TERM_COUNTS, ([word_phrase(t) for t in terms], *partition))
        return any(docs is None for _, docs in await self._pool.read(context_for([scope]), counted))

    async def _text_rows(
        self, query: RecordQuery, match: str, limit: int, sets: VectorSets | None
    ) -> list[Any]:
        words = match_words(match)
        if not any_word(words) or limit <= 0:
            return []
        # One partition's query is bounded by its words' postings (see ``text_search``).
        tenant = tenant_uuid(query.scope.tenant) if isinstance(query.scope, Scope) else None
        sql, params = text_search(query, words, limit, tenant, self.scored_per_word, sets)
        read = Read(sql, params, binary=sets is not None)
        return await _with_kept_plan(self._pool, context_for([query.scope]), read)

    async def text_ids(self, query: RecordQuery, match: str, limit: int) -> list[tuple[int, float]]:
        """``text``'s hits as record ids with their scores (the final page is joined to its
        records in the same statement, so there is nothing to save by leaving them out)."""
        hits = await self.text(query, match, limit)
        return [(r.id, score) for r, score in hits if r.id is not None]

    async def document_frequencies(
        self, namespace: str, scope: Scope, terms: Sequence[str]
    ) -> dict[str, int]:
        """How many of the partition's records hold each term (its own records only: what is
        common elsewhere is neither counted nor revealed). A term of one word is one row of
        ``text_terms``, all of them in one statement; a term of several words ("user_city",
        the phrase "user city") is counted in the records."""
        phrases = {term: word_phrase(term) for term in terms}
        asked = [t for t in terms if phrases[t] is not None]
        # No letter or digit: the index holds no such word.
        counts = {term: 0 for term in terms if phrases[term] is None}
        partition = (tenant_uuid(scope.tenant), namespace, *scope.columns())
        # One round trip for the words; phrases, rare in a query, are counted after it.
        rows = await self._pool.read(
            context_for([scope]),
            Read(PARTITION_TERM_COUNTS, ([phrases[t] for t in asked], *partition)),
        )
        for at, docs in rows:
            if docs is not None:
                counts[asked[at - 1]] = int(docs)
        if any(term not in counts for term in asked):
            async with self._pool.transaction(context_for([scope])) as conn:
                for term in asked:
                    if term not in counts:
                        counts[term] = await _phrase_count(conn, namespace, scope, term)
        return {term: counts[term] for term in terms}

    async def document_count(self, namespace: str, scope: Scope) -> int:
        """How many records the partition holds (one row of ``text_stats``: no count)."""
        rows = await self._pool.read(
            context_for([scope]),
            Read(f"SELECT docs FROM text_stats WHERE {PARTITION}", (namespace, *scope.columns())),
        )
        return int(rows[0][0]) if rows else 0

    async def record_ids(self, query: RecordQuery) -> list[int]:
        """Row ids of the records ``query`` selects."""
        sql, params = record_select(query, columns="id")
        rows = await self._pool.read(context_for([query.scope]), Read(sql, params))
        return [row[0] for row in rows]

    async def vectors(self, query: RecordQuery, model: str) -> tuple[list[int], list[bytes]]:
        """Ids and float32 vector bytes of ``model`` for the records ``query`` selects."""
        rows = await self._binary_rows(query, *vector_select(query, model))
        return [r[0] for r in rows], [r[1] for r in rows]

    async def part_vectors(self, query: RecordQuery, model: str) -> dict[int, bytes]:
        """Each selected record's part vectors of ``model``, for those that have any."""
        rows = await self._binary_rows(query, *part_vector_select(query, model))
        return {int(r[0]): bytes(r[1]) for r in rows}

    async def keyed_vectors(
        self, query: RecordQuery, model: str
    ) -> list[tuple[int, bytes | None, bytes | None]]:
        """Each selected record's id, vector and part vectors of ``model`` (``None`` where
        it has none)."""
        rows = await self._binary_rows(query, *keyed_vector_select(query, model))
        return [(int(r[0]), r[1], None if r[2] is None else bytes(r[2])) for r in rows]

    @property
    def held_vectors_up_to(self) -> int:
        """Partitions searched exactly may be searched from vectors a process holds (kept
        current from the log, ``FollowsTenantLog``); none when the index is preferred."""
        return 0 if self.prefer_index else self.exact_nearest_up_to

    async def log_position(self, scope: Scope) -> int:
        """The position of the newest event of ``scope``'s tenant (0 for none)."""
        rows = await self._pool.read(
            context_for([scope]),
            Read(
                "SELECT coalesce(max(position), 0) FROM events WHERE tenant_uuid = %s",
                (tenant_uuid(scope.tenant),),
            ),
        )
        return int(rows[0][0])

    async def log_changes(
        self, scope: Scope, after: int, limit: int
    ) -> list[tuple[int, str, str | None]]:
        """Position, provider id and key of the events of ``scope``'s tenant after
        ``after``, oldest first, at most ``limit``."""
        rows = await self._pool.read(
            context_for([scope]),
            Read(
                "SELECT position, provider_id, payload ->> 'key' FROM events "
                "WHERE tenant_uuid = %s AND position > %s ORDER BY position LIMIT %s",
                (tenant_uuid(scope.tenant), after, limit),
            ),
        )
        return [(int(position), str(provider), key) for position, provider, key in rows]

    async def vector_sets(self, query: RecordQuery, model: str) -> dict[int, bytes]:
        """Each selected record's vectors of ``model``: the whole text's, then its parts'."""
        rows = await self._binary_rows(query, *vector_set_select(query, model))
        return {int(r[0]): r[1] + (bytes(r[2]) if r[2] else b"") for r in rows}

    async def _binary_rows(self, query: RecordQuery, sql: str, params: list[Any]) -> list[Any]:
        # Vectors come back in pgvector's binary form, read without a text round trip.
        return await self._pool.read(context_for([query.scope]), Read(sql, params, binary=True))

    async def nearest(
        self, query: RecordQuery, model: str, vector: bytes, limit: int
    ) -> list[tuple[int, float]]:
        """Ids and cosine similarities of the ``limit`` records ``query`` selects nearest to
        ``vector``, best first, through the HNSW index of ``model`` when there is one."""
        rows = await self._nearest_rows(query, model, vector, limit, None)
        return [(int(r[0]), float(r[1])) for r in rows]

    async def nearest_best(
        self, query: RecordQuery, vector: bytes, limit: int, found: BestHits
    ) -> list[tuple[int, float]]:
        """``nearest`` (of ``found.model``, not ``None``); the best hits' records and vector
        sets go into ``found``."""
        if found.model is None:
            raise ValueError("a nearest-vector search needs a model")
        sets = VectorSets(found.model, found.best, found.every_record)
        rows = await self._nearest_rows(query, found.model, vector, limit, sets)
        return _best_hits(rows, found)

    async def _nearest_rows(
        self, query: RecordQuery, model: str, vector: bytes, limit: int, sets: VectorSets | None
    ) -> list[Any]:
        exact = 0 if self.prefer_index else self.exact_nearest_up_to
        sql, params = nearest_select(query, model, len(vector) // 4, limit, exact, sets)
        # pgvector 0.8: keep scanning the graph until enough rows pass the partition filter.
        # The statement's plan is made once per connection (see ``_with_kept_plan``).
        settings = {"hnsw.iterative_scan": "relaxed_order", "plan_cache_mode": "force_generic_plan"}
        if self.prefer_index:
            # Off: scanning the table, or another index and sorting its rows by distance. A
            # plan the connection kept for the same statement was made without these.
            settings |= dict.fromkeys(_EXACT_PLANS, "off")
            settings["plan_cache_mode"] = "force_custom_plan"
        # Settings of the read's own transaction, in one statement (see ``Reads``).
        local = ", ".join(
            f"set_config('{name}', '{value}', true)" for name, value in settings.items()
        )
        reads = [
            Read(f"SELECT {local}"),
            Read(sql, [StoredVector(vector), *params], binary=sets is not None, prepare=True),
        ]
        async with self._pool.reads(context_for([query.scope])) as transaction:
            return (await transaction.run(reads, last=True))[-1]

    async def unvectored(self, query: RecordQuery, model: str) -> list[Record]:
        """Records ``query`` selects that have no vector of ``model``."""
        sql, params = unvectored_select(query, model)
        rows = await self._pool.read(context_for([query.scope]), Read(sql, params))
        return [row_record(r) for r in rows]

    async def drop_vectors(self, namespace: str, *, keep_model: str | None = None) -> None:
        """Delete the stored vectors of ``namespace``'s records, every tenant's (all but
        ``keep_model``'s, when given)."""
        sql = (
            f"UPDATE {table_for(namespace)} SET embedding = NULL, embedding_model = NULL, "
            "embedding_parts = NULL WHERE namespace = %s AND embedding IS NOT NULL"
        )
        params: tuple[str, ...] = (namespace,)
        if keep_model is not None:
            sql, params = f"{sql} AND embedding_model != %s", (namespace, keep_model)
        async with self._pool.transaction(ADMIN) as conn:
            await hold_writers(conn)
            await conn.execute(sql, params)

    async def vector_counts(self) -> dict[str, int]:
        """How many records hold a vector, per model, over every tenant (reads every row)."""
        counts = " UNION ALL ".join(
            f"SELECT embedding_model, count(*) FROM {table} "
            "WHERE embedding_model IS NOT NULL GROUP BY 1"
            for table in RECORD_TABLES
        )
        rows = await self._pool.read(ADMIN, Read(counts))
        totals: dict[str, int] = {}
        for model, count in rows:
            totals[str(model)] = totals.get(str(model), 0) + int(count)
        return dict(sorted(totals.items()))

    async def edge_vector_models(self) -> set[str]:
        """The models of the vectors of each table's lowest and highest vectored record id
        (none, for a login that may not read across tenants)."""
        rows = await self._pool.read(self.statistics, Read(EDGE_VECTOR_MODELS))
        return {str(model) for (model,) in rows}

    async def put_vectors(
        self,
        model: str,
        vectors: Sequence[tuple[int, bytes]],
        events: Sequence[EventEnvelope],
        *,
        parts: Sequence[bytes | None] | None = None,
        versions: Sequence[int] | None = None,
        durable: bool = True,
        then: Sequence[tuple[str, Sequence[Any]]] = (),
    ) -> None:
        """Store vectors (and part vectors, aligned with them) by record id, skipping records
        deleted since they were read — and, with ``versions`` (aligned too), records written
        again since — and append ``events`` in the same transaction, with the statements
        ``then`` after them (``durable=False``: see ``hold_writers``)."""
        extra = parts if parts is not None else [None] * len(vectors)
        read = versions if versions is not None else [None] * len(vectors)
        batch = list(events)
        ids = [record_id for record_id, _ in vectors]
        # The events say whose records these are; without any, only the admin may write.
        context = context_for(e.scope for e in batch) if batch else ADMIN
        async with self._pool.transaction(context) as conn:
            tables = [
                r[0] for r in await (await conn.execute(_TABLES_OF_IDS, {"ids": ids})).fetchall()
            ]
        for table in tables:
            await self._indexes.ensure(table, model, len(vectors[0][1]) // 4)
        async with self._pool.transaction(context) as conn:
            await hold_writers(conn, durable=durable)
            async with conn.cursor() as cursor:
                for table in tables:
                    await cursor.executemany(
                        f"UPDATE {table} SET embedding = %s, embedding_model = %s, "
                        "embedding_parts = %s WHERE id = %s "
                        "AND (%s::integer IS NULL OR version = %s)",
                        [
                            (StoredVector(blob), model, part, record_id, version, version)
                            for (record_id, blob), part, version in zip(
                                vectors, extra, read, strict=True
                            )
                        ],
                    )
                for statement in then:
                    await cursor.execute(*statement)
            await insert_events(conn, batch)

    async def neighbours(
        self,
        namespace: str,
        scope: Scope,
        anchors: Sequence[tuple[str, datetime]],
        count: int,
        alive_at: datetime,
    ) -> list[list[Record]]:
        """For each (thread, created_at) anchor, up to ``count`` records written just before
        and just after it in the same thread, nearest first."""
        base = (namespace, *scope.columns())
        alive = time_text(alive_at)
        table = table_for(namespace)
        # Every anchor's turns before and after, in one round trip.
        reads = [
            Read(
                f"SELECT {record_select_list()} FROM {table} r WHERE {PARTITION} "
                f"AND thread = %s AND created_at {op} %s "
                "AND (expires_at IS NULL OR expires_at > %s) AND hidden_at IS NULL "
                f"ORDER BY created_at {order} LIMIT %s",
                (*base, thread, time_text(created), alive, count),
            )
            for thread, created in anchors
            for op, order in (("<", "DESC"), (">", "ASC"))
        ]
        if not reads:
            return []
        rows = await self._pool.read_all(context_for([scope]), reads)
        return [
            [row_record(r) for r in before + after]
            for before, after in zip(rows[::2], rows[1::2], strict=True)
        ]

    async def data_version(self) -> int:
        """The server's write-ahead log position: it moves on every commit, anyone's, so a
        cache checked against it never misses another process's write."""
        rows = await self._pool.read(
            NOBODY,
            Read(
                "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() "
                "ELSE pg_current_wal_lsn() END - '0/0'::pg_lsn)::bigint"
            ),
        )
        return int(rows[0][0]) if rows else 0
