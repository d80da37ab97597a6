"""A full-text statement that leaves out a query's too common words itself (pure SQL building,
tested without a database).

Hybrid recall scores only a query's words that are not too common in the partition
(``WordPruning``, the rule ``Indexer`` applies on the partition's document frequencies). Asked
of the database in two round trips (the frequencies, then the search), the rule costs a wait
for the server; here it runs inside the full-text statement, from the same per-partition
statistics (``text_terms``, ``text_stats``), in one. It covers terms of one word the index
holds as one lexeme; a term that is not one (its frequency in ``PARTITION_TERM_COUNTS`` is
NULL) makes the statement keep no word and find nothing, and a search that finds nothing asks
``PARTITION_TERM_COUNTS`` alone whether that was why (the caller then asks the general way).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

from engramdb.core.scope import Scope
from engramdb.storage.postgres.queries import (
    PARTITION,
    PARTITION_TERM_COUNTS,
    VectorSets,
    text_search,
    word_phrase,
)
from engramdb.storage.records import RecordQuery
from engramdb.storage.search_backend import SCORED_PER_WORD, WordPruning

#: A term the pruned statement can count: one run of letters and digits, in lower case.
_ONE_PIECE = re.compile(r"[^\W_]+", re.UNICODE)


def prunable(terms: Sequence[str]) -> bool:
    """Whether every term is one piece of letters and digits already in lower case, so that
    it is its own full-text word and its phrase is itself, quoted."""
    return all(_ONE_PIECE.fullmatch(t) is not None and t == t.lower() for t in terms)


def _kept(rule: WordPruning) -> str:
    """The CTEs ending in ``kept`` (``words``, ``match``): the terms ``rule`` keeps, in their
    order, as ``Indexer._selective`` keeps them (none, when a term has no frequency here).
    Parameters: the terms' phrases, then the
    partition (tenant id, namespace, scope columns), the terms, and the partition again
    (namespace, scope columns)."""
    share, least, most = float(rule.max_term_share), int(rule.min_docs), int(rule.max_scored_docs)
    by_share = f"({share} > 0 AND size.total >= {least})"
    # Rarest first, ties by the term's text (code point order, as Python sorts strings).
    rarest = 'ORDER BY docs, term COLLATE "C"'
    return f"""counted AS MATERIALIZED (
            SELECT u.at, u.term, c.docs::float8 AS docs
            FROM ({PARTITION_TERM_COUNTS}) AS c(at, docs)
            JOIN unnest(%s::text[]) WITH ORDINALITY AS u(term, at) USING (at)),
        size AS (
            SELECT coalesce((SELECT docs FROM text_stats WHERE {PARTITION}), 0)::float8 AS total),
        shared AS (
            SELECT counted.* FROM counted, size
            WHERE NOT {by_share} OR counted.docs <= {share} * size.total),
        common AS (
            SELECT * FROM shared
            UNION ALL
            (SELECT * FROM counted WHERE NOT EXISTS (SELECT FROM shared)
             ORDER BY docs, at LIMIT 1)),
        kept AS (
            SELECT string_agg(term, ' ' ORDER BY at) AS words,
                   string_agg('"' || term || '"', ' or ' ORDER BY at) AS match
            FROM (SELECT term, at, row_number() OVER ({rarest}) AS k,
                         sum(docs) OVER ({rarest}) AS running
                  FROM common
                  WHERE NOT EXISTS (SELECT FROM counted WHERE docs IS NULL)) AS rarest
            WHERE {most} = 0 OR k = 1 OR running <= {most})"""


def pruned_text_search(
    query: RecordQuery,
    terms: Sequence[str],
    rule: WordPruning,
    limit: int,
    tenant: uuid.UUID,
    bound: int = SCORED_PER_WORD,
    sets: VectorSets | None = None,
) -> tuple[str, list[Any]]:
    """``text_search`` of a one-partition ``query`` for the ``terms`` (see ``prunable``)
    ``rule`` keeps; a term whose document frequency the statement cannot know (NULL in
    ``PARTITION_TERM_COUNTS``) makes it keep nothing, and find nothing."""
    if not isinstance(query.scope, Scope):
        raise ValueError("word pruning needs one partition")
    partition = (query.namespace, *query.scope.columns())
    phrases = [word_phrase(t) for t in terms]
    sql, params = text_search(query, list(terms), limit, tenant, bound, sets, _kept(rule))
    return sql, [phrases, tenant, *partition, list(terms), *partition, *params]
