"""Both searches of a hybrid recall in one statement (pure SQL building, tested without a
database).

Run side by side, the full-text and the nearest-vector statements each send their best hits'
records and vector sets, a hit both find twice, and compete for the server's cores and the
client's. When the query's vector is known before the full-text statement is sent, one
statement runs both searches (as common table expressions, each exactly the statement it
replaces) and sends every best hit's record and vectors once.
"""

from __future__ import annotations

from typing import Any

from engramdb.storage.postgres.queries import VectorSets

#: Which search a row of ``both_select`` comes from.
TEXT, NEAREST = 0, 1


def both_select(
    text: tuple[str, list[Any]],
    nearest: tuple[str, str, list[Any]],
    table: str,
    sets: VectorSets,
) -> tuple[str, list[Any]]:
    """One statement of ``text`` (a full-text statement of ``SCORES_ONLY`` rows) and
    ``nearest`` (``nearest_search``'s WITH clause, search and parameters, the probe first).

    Each row is the search it comes from (``TEXT``, ``NEAREST``) and then a row as
    ``VectorSets`` lays it out for that search alone, in that search's order: the text hits
    first, then the nearest. A hit among the best of either search carries its vectors (and
    its record) on its first row only; ``best`` is true on that row."""
    text_sql, text_params = text
    head, found, nearest_params = nearest
    # Each search chooses its best as ranking does (higher score, then lower id); a hit's
    # first row carries what either search would have sent of it.
    sql = f"""
        WITH text_hits AS MATERIALIZED ({text_sql}),
        nearest_hits AS MATERIALIZED ({head}SELECT id, distance FROM ({found}) AS found),
        ranked AS (
            SELECT {TEXT} AS search, id, key, score, NULL::float8 AS distance,
                   {sets.ranked("score DESC, id")} FROM text_hits
            UNION ALL
            SELECT {NEAREST}, id, NULL, 1 - distance, distance,
                   {sets.ranked("1 - distance DESC, id")} FROM nearest_hits),
        hits AS (
            SELECT search, id, key, score, distance,
                   row_number() OVER (PARTITION BY id ORDER BY search) = 1 AS first,
                   bool_or(best) OVER (PARTITION BY id) AS chosen
            FROM ranked),
        carried AS (SELECT search, id, key, score, distance, first, first AND chosen AS best
                 FROM hits)
        SELECT carried.search, {sets.columns("carried", "carried.score")}
        FROM carried {sets.of("carried", table, "carried.first")}
        ORDER BY carried.search, CASE WHEN carried.search = {TEXT} THEN -carried.score
                                   ELSE carried.distance END, carried.key, carried.id"""
    return sql, [*text_params, *nearest_params]
