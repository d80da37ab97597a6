"""Each partition's words, kept by the writes (PostgreSQL migration 0013): ``text_terms``
holds a partition's document frequency per lexeme, ``text_postings`` which of its records hold
each lexeme, newest first by record id.

A full-text query reads a word's document frequency as one row, and at most a bounded number
of its newest postings instead of every record holding it, so its cost does not grow with the
partition. A partition is named by ``engram_partition_key`` (migration 0012) within its
tenant: the rows of a tenant are its own, go with it, and row-level security binds them.

Since migration 0015 one trigger function per record table, ``engram_text_index``, keeps these
and the partition's ``text_stats`` row in the writing transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

#: Rows of an update whose text or partition changed (the others leave the statistics be).
MOVED = (
    "(SELECT {side}.* FROM old_rows o JOIN new_rows n USING (id) "
    "WHERE (o.tsv, o.namespace, o.tenant, o.user_id, o.agent, o.session, o.plan) "
    "IS DISTINCT FROM (n.tsv, n.namespace, n.tenant, n.user_id, n.agent, n.session, n.plan)) "
    "AS moved"
)
#: The partition key of a record's (or a ``text_stats`` row's) scope columns.
PART_KEY = "engram_partition_key(namespace, tenant, user_id, agent, session, plan)"
_TERM_KEY = "tenant_uuid, part_key, lexeme"
_PRIVATE = "tenant_uuid = engram_tenant() AND (engram_user() IS NULL OR user_uuid = engram_user())"


def _postings(rows: str) -> str:
    """One row per (record, distinct lexeme) of the records ``rows``."""
    return (
        f"SELECT tenant_uuid, {PART_KEY} AS part_key, lexeme, id AS record_id, user_uuid "
        f"FROM {rows}, unnest(tsvector_to_array(tsv)) AS lexeme"
    )


def _terms(rows: str) -> str:
    """Per partition and lexeme of the records ``rows``: how many of them hold it."""
    return (
        f"SELECT {_TERM_KEY}, user_uuid, count(*) AS docs FROM ({_postings(rows)}) AS p "
        f"GROUP BY {_TERM_KEY}, user_uuid"
    )


def _add(rows: str) -> tuple[str, str]:
    """Count the records ``rows`` in: their postings, then their terms (in key order, so
    that concurrent writers lock the rows alike)."""
    return (
        f"INSERT INTO text_postings ({_TERM_KEY}, record_id, user_uuid) {_postings(rows)}",
        f"""INSERT INTO text_terms AS t ({_TERM_KEY}, user_uuid, docs) {_terms(rows)}
        ORDER BY {_TERM_KEY}
        ON CONFLICT ({_TERM_KEY}) DO UPDATE SET docs = t.docs + excluded.docs""",
    )


def _take(rows: str) -> tuple[str, str]:
    """Count the records ``rows`` out; a term no record holds any more goes."""
    same = " AND ".join(f"t.{c} = d.{c}" for c in _TERM_KEY.split(", "))
    return (
        f"""DELETE FROM text_postings AS t USING ({_postings(rows)}) AS d
        WHERE {same} AND t.record_id = d.record_id""",
        f"""WITH d AS ({_terms(rows)}),
        gone AS (DELETE FROM text_terms AS t USING d WHERE {same} AND t.docs <= d.docs)
        UPDATE text_terms AS t SET docs = t.docs - d.docs FROM d
        WHERE {same} AND t.docs > d.docs""",
    )


#: A record's count of distinct words, taken once per record in a subquery (taken per word,
#: each would read the record's whole ``tsvector`` again).
WORD_COUNT = "length(tsv) AS dl"
#: A posting's counts (migration 0019), of a row of a record (with its ``WORD_COUNT``) and one
#: of its ``word``s: how often the record holds the word, and how many words the record holds.
POSTING_COUNTS = "cardinality(word.positions) AS tf, dl"


def _add_once(rows: str, *, counts: bool = False) -> str:
    """:func:`_add` in one statement: each record's partition key is computed once, not once
    per word, and its words are listed once for both tables (a fifth less of a write's
    server time). With ``counts``, each posting also gets ``POSTING_COUNTS``."""
    counted = f", {WORD_COUNT}" if counts else ""
    keyed = f"(SELECT *, {PART_KEY} AS part_key{counted} FROM {rows} OFFSET 0) AS keyed"
    words = "unnest(tsv) AS word" if counts else "unnest(tsvector_to_array(tsv)) AS lexeme"
    listed = f"{'word.' if counts else ''}lexeme, id AS record_id, user_uuid"
    listed += f", {POSTING_COUNTS}" if counts else ""
    posted = f"{_TERM_KEY}, record_id, user_uuid{', tf, dl' if counts else ''}"
    return f"""WITH p AS MATERIALIZED (
            SELECT tenant_uuid, part_key, {listed} FROM {keyed}, {words}),
        posted AS (INSERT INTO text_postings ({posted}) SELECT * FROM p)
        INSERT INTO text_terms AS t ({_TERM_KEY}, user_uuid, docs)
        SELECT {_TERM_KEY}, user_uuid, count(*) FROM p GROUP BY {_TERM_KEY}, user_uuid
        ORDER BY {_TERM_KEY}
        ON CONFLICT ({_TERM_KEY}) DO UPDATE SET docs = t.docs + excluded.docs"""


def _take_postings(rows: str) -> str:
    """Delete the postings of the records ``rows``, looked up by their whole key (the planner,
    left to join the rows and their words as it likes, reads every posting of the partition
    and filters them by record)."""
    same = " AND ".join(f"t.{c} = d.{c}" for c in (*_TERM_KEY.split(", "), "record_id"))
    return (
        f"WITH d AS MATERIALIZED ({_postings(rows)}) "
        f"DELETE FROM text_postings AS t USING d WHERE {same}"
    )


def _text_index_body(
    stats_add: Callable[[str], str], stats_take: Callable[[str], str], *, counts: bool = False
) -> str:
    """One trigger function for a record table's whole full-text statistics (migration 0015):
    the partition's counts first, then its postings (with ``counts``, their
    ``POSTING_COUNTS``) and terms, as the two functions it replaces ran (so that concurrent
    writers lock rows in one order)."""
    moved = "(SELECT * FROM {side}_rows WHERE id = ANY(moved_ids)) AS moved"
    taken = (stats_take(moved.format(side="old")), _take_postings(moved.format(side="old")))
    added = (
        stats_add(moved.format(side="new")),
        _add_once(moved.format(side="new"), counts=counts),
    )
    return f"""
        DECLARE
            moved_ids bigint[];
        BEGIN
            IF TG_OP = 'INSERT' THEN
                -- An upsert whose every row existed inserts none.
                IF NOT EXISTS (SELECT FROM new_rows) THEN RETURN NULL; END IF;
                {stats_add("new_rows")}; {_add_once("new_rows", counts=counts)};
            ELSIF TG_OP = 'DELETE' THEN
                {stats_take("old_rows")}; {_take_postings("old_rows")}; {_take("old_rows")[1]};
            ELSE
                -- Most updates (a vector, a hide, a new version) keep a record's words and
                -- partition: they cost one look at the rows.
                SELECT array_agg(id) INTO moved_ids FROM {MOVED.format(side="o")};
                IF moved_ids IS NULL THEN RETURN NULL; END IF;
                {"; ".join(taken)}; {_take(moved.format(side="old"))[1]};
                {"; ".join(added)};
            END IF;
            RETURN NULL;
        END"""


def text_index_schema(
    tables: Sequence[str], stats_add: Callable[[str], str], stats_take: Callable[[str], str]
) -> tuple[str, ...]:
    """Migration 0015: the triggers of migrations 0012 (``text_stats``) and 0013 (terms and
    postings) of ``tables`` become one, ``engram_text_index``, which returns at once for an
    update that changes no record's words or partition, and deletes postings by their key.
    ``stats_add(rows)`` and ``stats_take(rows)`` count records in and out of ``text_stats``."""
    return (
        *(
            f"DROP TRIGGER {table}_{name}_{op} ON {table}"
            for table in tables
            for name in ("stats", "terms")
            for op in ("insert", "delete", "update")
        ),
        "DROP FUNCTION engram_text_stats()",
        "DROP FUNCTION engram_text_terms()",
        f"""CREATE FUNCTION engram_text_index() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = public, pg_temp AS
        $${_text_index_body(stats_add, stats_take)}$$""",
        *(s for table in tables for s in statement_triggers(table, "text", "engram_text_index")),
        *_words_go_with_tenant(),
    )


#: Migration 0017: the trigger's statements join a write's few rows to the words' tables by
#: their keys. PL/pgSQL keeps each statement's first plan for the connection's life, and
#: planned while the tables were small (or their statistics stale) that was a hash join over
#: a whole table: every later update or delete of a record's words read every term and
#: posting of every tenant. Without hash and merge joins, the plan is index lookups at any
#: size.
TEXT_INDEX_LOOKUPS = (
    "ALTER FUNCTION engram_text_index() SET enable_hashjoin = off",
    "ALTER FUNCTION engram_text_index() SET enable_mergejoin = off",
)


def posting_counts_schema(
    tables: Sequence[str], stats_add: Callable[[str], str], stats_take: Callable[[str], str]
) -> tuple[str, ...]:
    """Migration 0019: each posting keeps ``POSTING_COUNTS``, so that a full-text query
    scores a hit from the postings it walked instead of reading the record's whole
    ``tsvector`` (over a quarter of the query's server time). The postings stored so far get
    theirs from their records; the trigger function writes them from now on."""
    both = ("text_postings", *tables)
    return (
        "ALTER TABLE text_postings ADD COLUMN tf integer, ADD COLUMN dl integer",
        # By the owner, whom the tables' row security would otherwise show no row.
        *(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY" for table in both),
        *(
            f"""UPDATE text_postings AS p SET tf = counted.tf, dl = counted.dl
            FROM (SELECT tenant_uuid, part_key, id, word.lexeme, {POSTING_COUNTS}
                  FROM (SELECT *, {PART_KEY} AS part_key, {WORD_COUNT} FROM {table} OFFSET 0)
                       AS r, unnest(tsv) AS word) AS counted
            WHERE p.tenant_uuid = counted.tenant_uuid AND p.part_key = counted.part_key
              AND p.lexeme = counted.lexeme AND p.record_id = counted.id"""
            for table in tables
        ),
        *(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY" for table in both),
        f"""CREATE OR REPLACE FUNCTION engram_text_index() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = public, pg_temp AS
        $${_text_index_body(stats_add, stats_take, counts=True)}$$""",
        # Replacing the function dropped its settings.
        *TEXT_INDEX_LOOKUPS,
    )


def _words_go_with_tenant() -> tuple[str, ...]:
    """The words' tables lose their foreign key to ``tenants`` (a key check per word written,
    a tenth of a write's server time); a deleted tenant's rows are deleted by a trigger
    instead (its records' triggers have taken them already: this removes any left)."""
    tables = ("text_postings", "text_terms")
    deletes = " ".join(
        f"DELETE FROM {table} WHERE tenant_uuid IN (SELECT id FROM old_rows);" for table in tables
    )
    return (
        *(f"ALTER TABLE {table} DROP CONSTRAINT {table}_tenant_uuid_fkey" for table in tables),
        f"""CREATE FUNCTION engram_tenant_words_gone() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = public, pg_temp AS $$
        BEGIN {deletes} RETURN NULL; END $$""",
        """CREATE TRIGGER tenants_words_delete AFTER DELETE ON tenants
            REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
            EXECUTE FUNCTION engram_tenant_words_gone()""",
    )


def _trigger_body() -> str:
    taken = _take(MOVED.format(side="o"))
    added = _add(MOVED.format(side="n"))
    return f"""
        BEGIN
            IF TG_OP = 'INSERT' THEN {"; ".join(_add("new_rows"))};
            ELSIF TG_OP = 'DELETE' THEN {"; ".join(_take("old_rows"))};
            ELSE {"; ".join(taken)}; {"; ".join(added)};
            END IF;
            RETURN NULL;
        END"""


def statement_triggers(table: str, name: str, function: str) -> tuple[str, str, str]:
    """Triggers calling ``function`` after each statement that inserts, deletes or updates
    rows of ``table``, with the rows it touched as ``new_rows`` and ``old_rows``."""
    return (
        f"""CREATE TRIGGER {table}_{name}_insert AFTER INSERT ON {table}
            REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {function}()""",
        f"""CREATE TRIGGER {table}_{name}_delete AFTER DELETE ON {table}
            REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION {function}()""",
        f"""CREATE TRIGGER {table}_{name}_update AFTER UPDATE ON {table}
            REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
            FOR EACH STATEMENT EXECUTE FUNCTION {function}()""",
    )


def text_terms_schema(
    tables: Sequence[str], security: Callable[[str], tuple[str, ...]]
) -> tuple[str, ...]:
    """Migration 0013: the two tables, filled from the records stored so far, and the
    statement triggers of ``tables`` that keep them in the writing transaction.

    ``security(table)`` gives a table's row-level security statements. The trigger function
    runs as its owner (who is not bound by the tables' row security), so that writes by any
    role, and cascades of a tenant's deletion, keep the counts."""
    return (
        """CREATE TABLE text_terms (
            tenant_uuid uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
            part_key text COLLATE "C" NOT NULL,
            lexeme text COLLATE "C" NOT NULL,
            user_uuid uuid,
            docs bigint NOT NULL,
            PRIMARY KEY (tenant_uuid, part_key, lexeme)
        )""",
        # One posting per record and lexeme; a word's newest postings are an index range.
        """CREATE TABLE text_postings (
            tenant_uuid uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
            part_key text COLLATE "C" NOT NULL,
            lexeme text COLLATE "C" NOT NULL,
            record_id bigint NOT NULL,
            user_uuid uuid,
            PRIMARY KEY (tenant_uuid, part_key, lexeme, record_id)
        )""",
        *(
            statement
            for table in ("text_terms", "text_postings")
            for statement in (
                *security(table),
                # A partition's words are as private as its records: its user's, when the
                # transaction names one (a record's user is its partition's).
                f"ALTER POLICY tenant_isolation ON {table} USING ({_PRIVATE}) "
                f"WITH CHECK ({_PRIVATE})",
                f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY",
            )
        ),
        f"""CREATE FUNCTION engram_text_terms() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = public, pg_temp AS $${_trigger_body()}$$""",
        *(s for table in tables for s in statement_triggers(table, "terms", "engram_text_terms")),
        # Records stored before are counted once, here (by an owner the tables' row security
        # would otherwise show no row).
        *(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY" for table in tables),
        *(s for table in tables for s in recount_text_terms(table, "true")[2:]),
        *(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY" for table in tables),
    )


def recount_text_terms(table: str, where: str) -> tuple[str, ...]:
    """Statements recounting, from ``table``'s records, the terms and postings of the
    partitions ``where`` selects (each takes the clause's parameters). Run them before
    ``schema.recount_text_stats``: the partitions to clear are found through ``text_stats``."""
    known = f"SELECT tenant_uuid, {PART_KEY} AS part_key FROM text_stats WHERE {where}"
    return (
        *(
            f"DELETE FROM {target} AS t USING ({known}) AS s "
            "WHERE t.tenant_uuid = s.tenant_uuid AND t.part_key = s.part_key"
            for target in ("text_postings", "text_terms")
        ),
        *_add(f"(SELECT * FROM {table} WHERE {where}) AS r"),
    )
