"""The PostgreSQL schema as named, append-only migrations, and where each namespace lives.

Tenants and users are local replicas keyed by UUIDs derived from their names (see
``tenancy``); every memory table and the event log reference them with ``ON DELETE CASCADE``,
so deleting a tenant removes everything it stored. A user's id is scoped by its tenant's id,
and constraints hold every row to its own: a user row's id is the one derived from its tenant
and name, and a record's user row is in the record's own tenant. Each CoALA memory type has
its own table; all share one record layout, so the backend keeps a single record contract.

Row-level security binds two roles the migrations create: ``engram_service`` sees only the
rows of the tenant (and, for episodic and procedural memory, the user) set in the current
transaction; ``engram_admin`` is for explicit cross-tenant work (stats, rebuilds, reindexing).
``FORCE ROW LEVEL SECURITY`` binds an owner that is not a superuser to the policies too (none
names it, so its queries see no row), but an owner may switch the security off and a
superuser bypasses it: services connect as a service login instead (see ``logins``).
"""

from __future__ import annotations

from engramdb.storage.migrations import Migration
from engramdb.storage.postgres.text_terms import (
    MOVED,
    TEXT_INDEX_LOOKUPS,
    posting_counts_schema,
    statement_triggers,
    text_index_schema,
    text_terms_schema,
)

SERVICE_ROLE = "engram_service"
ADMIN_ROLE = "engram_admin"
#: The text search configuration of full-text keys and queries (migration 0010): words split
#: wherever SQLite's FTS5 ``unicode61`` tokenizer splits them, diacritics folded, and the
#: Porter stemmer FTS5 uses, so the same records match the same words on either backend
#: ("user.city" is two words, "lives" finds "living").
TEXT_CONFIG = "engram_text"
#: Characters that separate words, replaced by spaces before PostgreSQL's parser sees a text:
#: ASCII punctuation and symbols (the parser would keep "user.city", "a@b.com" or "v1.2" as one
#: token), and the Latin-1, general and CJK punctuation a database with the C locale would
#: otherwise take for letters.
WORD_SEPARATORS = (
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
    "\xa0¡¢£¤¥¦§¨©«¬\xad®¯°±´¶·¸»¿×÷"
    + "".join(chr(c) for c in range(0x2000, 0x2070))
    + "\u3000、。〃〈〉《》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟"
)

#: Namespace → table. Any other namespace (graph, files, custom providers) uses ``memory_records``.
NAMESPACE_TABLES: dict[str, str] = {
    "episodic": "episodic_memory",
    "conversation": "episodic_memory",
    "semantic": "semantic_memory",
    "semantic_public": "semantic_memory",
    "procedural": "procedural_memory",
    "workspace": "working_memory",
    "task_context": "task_context",
    "plans": "plans",
    "sessions": "sessions",
}
GENERIC_TABLE = "memory_records"
#: Tables whose rows are private to a user when the transaction names one (spec: episodic and
#: procedural memory are private to the user/agent pair).
USER_PRIVATE_TABLES = ("episodic_memory", "procedural_memory")
RECORD_TABLES: tuple[str, ...] = (*dict.fromkeys(NAMESPACE_TABLES.values()), GENERIC_TABLE)
#: Every table row-level security guards, in the order a tenant's rows are cascaded.
TENANT_TABLES: tuple[str, ...] = ("tenants", "users", *RECORD_TABLES, "events")


def table_for(namespace: str) -> str:
    """The table holding ``namespace``'s records."""
    return NAMESPACE_TABLES.get(namespace, GENERIC_TABLE)


_ROLES = f"""
DO $$
BEGIN
    -- Roles belong to the cluster, not the database: another database may be creating them
    -- at this very moment.
    BEGIN
        CREATE ROLE {SERVICE_ROLE} NOLOGIN NOSUPERUSER NOBYPASSRLS NOINHERIT;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
    BEGIN
        CREATE ROLE {ADMIN_ROLE} NOLOGIN NOSUPERUSER NOBYPASSRLS NOINHERIT;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END;
    -- The migrating user switches to these roles per transaction (SET LOCAL ROLE).
    IF NOT pg_has_role(current_user, '{SERVICE_ROLE}', 'MEMBER') THEN
        EXECUTE format('GRANT {SERVICE_ROLE} TO %I', current_user);
    END IF;
    IF NOT pg_has_role(current_user, '{ADMIN_ROLE}', 'MEMBER') THEN
        EXECUTE format('GRANT {ADMIN_ROLE} TO %I', current_user);
    END IF;
END $$"""

# Unset or empty settings read as NULL, which no row's tenant equals: no context, no rows.
_CONTEXT_FUNCTIONS = (
    """CREATE FUNCTION engram_tenant() RETURNS uuid LANGUAGE sql STABLE AS
       $$ SELECT nullif(current_setting('app.current_tenant', true), '')::uuid $$""",
    """CREATE FUNCTION engram_user() RETURNS uuid LANGUAGE sql STABLE AS
       $$ SELECT nullif(current_setting('app.current_user', true), '')::uuid $$""",
)

_IDENTITY = (
    """CREATE TABLE tenants (
        id uuid PRIMARY KEY,
        name text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL DEFAULT now()
    )""",
    """CREATE TABLE users (
        id uuid PRIMARY KEY,
        tenant_uuid uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        username text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (tenant_uuid, username)
    )""",
)

_EVENTS = (
    """CREATE TABLE events (
        position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tenant_uuid uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        event_id text NOT NULL UNIQUE,
        event_type text NOT NULL,
        schema_version integer NOT NULL,
        occurred_at timestamptz NOT NULL,
        producer json NOT NULL,
        trace json NOT NULL,
        tenant text COLLATE "C" NOT NULL,
        user_id text COLLATE "C" NOT NULL,
        agent text COLLATE "C" NOT NULL,
        session text COLLATE "C" NOT NULL,
        plan text COLLATE "C" NOT NULL,
        provider_id text NOT NULL,
        payload json NOT NULL
    )""",
    "CREATE INDEX events_by_type ON events (event_type, position)",
    "CREATE INDEX events_by_scope ON events (tenant, user_id, agent, position)",
    "CREATE INDEX events_by_provider ON events (provider_id, position)",
    "CREATE INDEX events_by_key ON events (provider_id, (payload ->> 'key'))",
    "CREATE INDEX events_by_tenant ON events (tenant_uuid)",
    # The log is append-only, with one exception: a hard forget may blank an event's payload
    # to a tombstone (payload.redacted = 1), changing nothing else.
    """CREATE FUNCTION engram_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF (NEW.position, NEW.tenant_uuid, NEW.event_id, NEW.event_type, NEW.schema_version,
            NEW.occurred_at, NEW.producer::text, NEW.trace::text, NEW.tenant, NEW.user_id,
            NEW.agent, NEW.session, NEW.plan, NEW.provider_id)
           IS NOT DISTINCT FROM
           (OLD.position, OLD.tenant_uuid, OLD.event_id, OLD.event_type, OLD.schema_version,
            OLD.occurred_at, OLD.producer::text, OLD.trace::text, OLD.tenant, OLD.user_id,
            OLD.agent, OLD.session, OLD.plan, OLD.provider_id)
           AND NEW.payload ->> 'redacted' = '1' THEN
            RETURN NEW;
        END IF;
        RAISE EXCEPTION 'the event log is append-only';
    END $$""",
    """CREATE TRIGGER events_append_only BEFORE UPDATE ON events
       FOR EACH ROW EXECUTE FUNCTION engram_events_append_only()""",
)


def _record_table(table: str) -> tuple[str, ...]:
    """One memory table in the shared record layout, with its full-text and scope indexes."""
    return (
        f"""CREATE TABLE {table} (
            id bigint PRIMARY KEY DEFAULT nextval('engram_record_ids'),
            tenant_uuid uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
            user_uuid uuid REFERENCES users (id) ON DELETE CASCADE,
            namespace text COLLATE "C" NOT NULL,
            tenant text COLLATE "C" NOT NULL,
            user_id text COLLATE "C" NOT NULL,
            agent text COLLATE "C" NOT NULL,
            session text COLLATE "C" NOT NULL,
            plan text COLLATE "C" NOT NULL,
            key text COLLATE "C" NOT NULL,
            value json NOT NULL,
            content_type text NOT NULL,
            metadata json NOT NULL,
            text text NOT NULL,
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
            created_at timestamptz NOT NULL,
            updated_at timestamptz,
            ttl_ms bigint,
            expires_at timestamptz,
            thread text COLLATE "C" NOT NULL DEFAULT '',
            occurred_at timestamptz,
            hidden_at timestamptz,
            embedding vector,
            embedding_model text,
            UNIQUE (namespace, tenant, user_id, agent, session, plan, key)
        )""",
        f"CREATE INDEX {table}_text ON {table} USING gin (tsv)",
        f"""CREATE INDEX {table}_thread ON {table}
            (namespace, tenant, user_id, agent, session, plan, thread, created_at)""",
        f"CREATE INDEX {table}_content_type ON {table} (namespace, tenant, content_type)",
        f"CREATE INDEX {table}_expiry ON {table} (expires_at) WHERE expires_at IS NOT NULL",
        f"CREATE INDEX {table}_tenant ON {table} (tenant_uuid)",
        f"CREATE INDEX {table}_user ON {table} (user_uuid) WHERE user_uuid IS NOT NULL",
    )


# The user id ``tenancy.user_uuid`` derives, in SQL: the name-based UUIDv8 (RFC 9562, B.2) of
# the user name within the tenant's id, its version nibble (hex digit 13) set to 8 and its
# variant bits (the top two of hex digit 17) to 10. One expression, so PostgreSQL inlines it.
_DIGEST = "encode(sha256(uuid_send(tenant) || convert_to(username, 'UTF8')), 'hex')"
_USER_UUID_FUNCTION = f"""CREATE FUNCTION engram_user_uuid(tenant uuid, username text) RETURNS uuid
    LANGUAGE sql STABLE STRICT PARALLEL SAFE AS $$
    SELECT overlay(overlay(left({_DIGEST}, 32) PLACING '8' FROM 13)
                   PLACING translate(substr({_DIGEST}, 17, 1), '0123456789abcdef',
                                     '89ab89ab89ab89ab') FROM 17)::uuid $$"""


def _tenant_scoped_ids() -> tuple[str, ...]:
    """Re-key every user row and every record's user to ids scoped by the tenant's id.

    User ids were the UUIDv5 of ``user:{tenant}:{user}``, so tenant ``acme`` user ``x:bob``
    and tenant ``acme:x`` user ``bob`` shared one row, and deleting either tenant cascaded
    into the other's records. Each row gets the id of its own tenant and name, each record the
    id of its own user (a row two tenants shared becomes two). A user row's id must then be
    the one derived from its tenant and name, and a record's user row be in the record's own
    tenant (a foreign key on both ids). The owner runs this with row-level security unforced,
    so that it sees every row.
    """
    derived = "engram_user_uuid(tenant_uuid, nullif(user_id, ''))"  # NULL for no user
    tables = ("users", *RECORD_TABLES)
    return (
        _USER_UUID_FUNCTION,
        *(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY" for table in tables),
        *(f"ALTER TABLE {table} DROP CONSTRAINT {table}_user_uuid_fkey" for table in RECORD_TABLES),
        # Old ids are version 5, new ones version 8: re-keyed rows never meet a stale id.
        "UPDATE users SET id = engram_user_uuid(tenant_uuid, username) "
        "WHERE id <> engram_user_uuid(tenant_uuid, username)",
        *(
            f"INSERT INTO users (id, tenant_uuid, username) "
            f"SELECT DISTINCT {derived}, tenant_uuid, user_id FROM {table} WHERE user_id <> '' "
            "ON CONFLICT DO NOTHING"
            for table in RECORD_TABLES
        ),
        *(
            f"UPDATE {table} SET user_uuid = {derived} WHERE user_uuid IS DISTINCT FROM {derived}"
            for table in RECORD_TABLES
        ),
        "ALTER TABLE users ADD CONSTRAINT users_id_derived "
        "CHECK (id = engram_user_uuid(tenant_uuid, username))",
        "ALTER TABLE users ADD CONSTRAINT users_tenant_uuid_id_key UNIQUE (tenant_uuid, id)",
        *(
            f"ALTER TABLE {table} ADD CONSTRAINT {table}_user_uuid_fkey "
            "FOREIGN KEY (tenant_uuid, user_uuid) REFERENCES users (tenant_uuid, id) "
            "ON DELETE CASCADE"
            for table in RECORD_TABLES
        ),
        *(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY" for table in tables),
    )


def _security(table: str) -> tuple[str, ...]:
    """Row-level security on ``table`` for the service role (tenant, and user where private)
    and the admin role (every row), forced so that a non-superuser owner's queries are bound
    as well."""
    tenant_column = "id" if table == "tenants" else "tenant_uuid"
    rule = f"{tenant_column} = engram_tenant()"
    if table in USER_PRIVATE_TABLES:
        rule += " AND (engram_user() IS NULL OR user_uuid = engram_user())"
    privileges = "SELECT, INSERT, UPDATE" if table == "events" else "SELECT, INSERT, UPDATE, DELETE"
    return (
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY tenant_isolation ON {table} TO {SERVICE_ROLE} "
        f"USING ({rule}) WITH CHECK ({rule})",
        f"CREATE POLICY admin_access ON {table} TO {ADMIN_ROLE} USING (true) WITH CHECK (true)",
        f"GRANT {privileges} ON {table} TO {SERVICE_ROLE}, {ADMIN_ROLE}",
    )


#: The tables whose tenant policy names the transaction's user too (where it names one).
_USER_POLICY_TABLES = (*USER_PRIVATE_TABLES, "text_terms", "text_postings")


def _policy_read_once(table: str) -> str:
    """``table``'s tenant policy as it was, but reading the transaction's tenant and user
    once per statement (a scalar subquery is an InitPlan) instead of once per row: an exact
    nearest-vector scan of 2,000 rows spent half its time in those per-row reads."""
    tenant_column = "id" if table == "tenants" else "tenant_uuid"
    rule = f"{tenant_column} = (SELECT engram_tenant())"
    if table in _USER_POLICY_TABLES:
        rule += " AND ((SELECT engram_user()) IS NULL OR user_uuid = (SELECT engram_user()))"
    return f"ALTER POLICY tenant_isolation ON {table} USING ({rule}) WITH CHECK ({rule})"


def _sql_text(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


_TEXT_TOKENS = (
    # Diacritics are folded as FTS5's ``remove_diacritics`` folds them ("café" is "cafe").
    "CREATE EXTENSION IF NOT EXISTS unaccent",
    "CREATE TEXT SEARCH DICTIONARY engram_porter (TEMPLATE = snowball, Language = porter)",
    f"CREATE TEXT SEARCH CONFIGURATION {TEXT_CONFIG} (PARSER = default)",
    f"""ALTER TEXT SEARCH CONFIGURATION {TEXT_CONFIG} ADD MAPPING FOR
        asciiword, word, numword, asciihword, hword, numhword, hword_asciipart, hword_part,
        hword_numpart, email, url, host, file, url_path, sfloat, float, int, uint, version
        WITH unaccent, engram_porter""",
    f"""CREATE FUNCTION engram_text_words(text) RETURNS text
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
        SELECT translate($1, {_sql_text(WORD_SEPARATORS)}, {_sql_text(" " * len(WORD_SEPARATORS))})
        $$""",
    *(
        statement
        for table in RECORD_TABLES
        for statement in (
            f"ALTER TABLE {table} DROP COLUMN tsv",
            f"""ALTER TABLE {table} ADD COLUMN tsv tsvector GENERATED ALWAYS AS
                (to_tsvector('{TEXT_CONFIG}', engram_text_words(text))) STORED""",
            f"CREATE INDEX {table}_text ON {table} USING gin (tsv)",
        )
    ),
)

_STATS_KEY = "namespace, tenant, user_id, agent, session, plan"
PARTITION_WORDS_ARGS = "text, text, text, text, text, text, tsvector"
#: A record's words, each prefixed with its partition's key (migration 0012's index).
PARTITION_WORDS = f"engram_partition_words({_STATS_KEY}, tsv)"


def _stats_rows(rows: str) -> str:
    """Per partition of the records ``rows``: its tenant id, key, count and total length."""
    return (
        f"SELECT tenant_uuid, {_STATS_KEY}, count(*) AS docs, "
        f"coalesce(sum(length(tsv)), 0) AS lexemes FROM {rows} "
        f"GROUP BY tenant_uuid, {_STATS_KEY}"
    )


def _stats_add(rows: str) -> str:
    """Count the records ``rows`` into their partitions' statistics, in key order so that
    concurrent writers lock rows alike."""
    return f"""
        INSERT INTO text_stats AS s (tenant_uuid, {_STATS_KEY}, docs, lexemes)
        {_stats_rows(rows)} ORDER BY {_STATS_KEY}
        ON CONFLICT ({_STATS_KEY}) DO UPDATE
        SET docs = s.docs + excluded.docs, lexemes = s.lexemes + excluded.lexemes"""


def _stats_take(rows: str) -> str:
    """Count the records ``rows`` out of their partitions' statistics (a partition whose row
    is gone, its tenant being deleted, has nothing left to count)."""
    keys = " AND ".join(f"s.{c} = d.{c}" for c in _STATS_KEY.split(", "))
    return f"""
        UPDATE text_stats AS s SET docs = s.docs - d.docs, lexemes = s.lexemes - d.lexemes
        FROM ({_stats_rows(rows)}) AS d WHERE {keys}"""


def _text_stats() -> tuple[str, ...]:
    """Each partition's record count and total document length (distinct lexemes), kept by
    statement triggers in the writing transaction, so BM25 reads them instead of counting the
    partition on every query, and nothing of another tenant enters a tenant's scores.

    The trigger function runs as its owner (who is not bound by the table's row security),
    so that writes by any role, and cascades of a tenant's deletion, keep the counts."""
    return (
        f"""CREATE TABLE text_stats (
            tenant_uuid uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
            namespace text COLLATE "C" NOT NULL,
            tenant text COLLATE "C" NOT NULL,
            user_id text COLLATE "C" NOT NULL,
            agent text COLLATE "C" NOT NULL,
            session text COLLATE "C" NOT NULL,
            plan text COLLATE "C" NOT NULL,
            docs bigint NOT NULL,
            lexemes bigint NOT NULL,
            PRIMARY KEY ({_STATS_KEY})
        )""",
        "CREATE INDEX text_stats_tenant ON text_stats (tenant_uuid)",
        *_security("text_stats"),
        "ALTER TABLE text_stats NO FORCE ROW LEVEL SECURITY",
        # Each record's words are indexed once more, each prefixed with its partition's key,
        # so that a partition's search reads only its own postings of its own words (the
        # words' index holds every tenant's; the partition's index, every row of it).
        """CREATE FUNCTION engram_partition_key(text, text, text, text, text, text)
            RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
            SELECT left(md5($1 || chr(31) || $2 || chr(31) || $3 || chr(31) || $4
                            || chr(31) || $5 || chr(31) || $6), 16) || ':' $$""",
        f"""CREATE FUNCTION engram_partition_words({PARTITION_WORDS_ARGS})
            RETURNS text[] LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
            SELECT array(SELECT engram_partition_key($1, $2, $3, $4, $5, $6) || lexeme
                         FROM unnest(tsvector_to_array($7)) AS lexeme) $$""",
        *(
            f"CREATE INDEX {table}_partition_words ON {table} USING gin ({PARTITION_WORDS})"
            for table in RECORD_TABLES
        ),
        f"""CREATE FUNCTION engram_text_stats() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = public, pg_temp AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN {_stats_add("new_rows")};
            ELSIF TG_OP = 'DELETE' THEN {_stats_take("old_rows")};
            ELSE
                {_stats_take(MOVED.format(side="o"))};
                {_stats_add(MOVED.format(side="n"))};
            END IF;
            RETURN NULL;
        END $$""",
        *(
            s
            for table in RECORD_TABLES
            for s in statement_triggers(table, "stats", "engram_text_stats")
        ),
        # Records stored before are counted once, here (by an owner the tables' row security
        # would otherwise show no row).
        *(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY" for table in RECORD_TABLES),
        *(recount_text_stats(table, "true")[1] for table in RECORD_TABLES),
        *(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY" for table in RECORD_TABLES),
    )


def recount_text_stats(table: str, where: str) -> tuple[str, str]:
    """Statements recounting, from ``table``'s records, the full-text statistics of the
    partitions ``where`` selects (both statements take the clause's parameters)."""
    return (
        f"DELETE FROM text_stats WHERE {where}",
        f"INSERT INTO text_stats (tenant_uuid, {_STATS_KEY}, docs, lexemes) "
        f"{_stats_rows(f'{table} WHERE {where}')}",
    )


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "0001_tenancy",
        (
            "CREATE EXTENSION IF NOT EXISTS vector",
            _ROLES,
            *_CONTEXT_FUNCTIONS,
            *_IDENTITY,
            "CREATE SEQUENCE engram_record_ids",
        ),
    ),
    Migration("0002_event_log", _EVENTS),
    Migration(
        "0003_memory_tables", tuple(s for table in RECORD_TABLES for s in _record_table(table))
    ),
    Migration(
        "0004_row_level_security",
        (
            *(s for table in TENANT_TABLES for s in _security(table)),
            f"GRANT USAGE ON SEQUENCE engram_record_ids TO {SERVICE_ROLE}, {ADMIN_ROLE}",
        ),
    ),
    # A login that is only a member of the service role checks the schema version on open.
    Migration(
        "0005_service_reads_migrations",
        (f"GRANT SELECT ON engram_migrations TO {SERVICE_ROLE}, {ADMIN_ROLE}",),
    ),
    # A record's sentences may have vectors of their own, stored beside its whole-text one.
    Migration(
        "0006_part_vectors",
        tuple(f"ALTER TABLE {table} ADD COLUMN embedding_parts bytea" for table in RECORD_TABLES),
    ),
    # Opening compares the models of each table's oldest and newest vectors with the engine's:
    # two lookups in this index, however many rows have no vector.
    Migration(
        "0007_vectored_ids",
        tuple(
            f"CREATE INDEX {table}_vectored ON {table} (id) WHERE embedding_model IS NOT NULL"
            for table in RECORD_TABLES
        ),
    ),
    Migration("0008_tenant_scoped_ids", _tenant_scoped_ids()),
    # Full-text keys are split, folded and stemmed the way SQLite's index does it.
    Migration("0010_text_tokens", _TEXT_TOKENS),
    # Every write of a record counts one version, so a writer can say which one it read.
    # Records stored before start at 1; a rebuild counts their writes from the log.
    Migration(
        "0011_record_versions",
        tuple(
            f"ALTER TABLE {table} ADD COLUMN version integer NOT NULL DEFAULT 1"
            for table in RECORD_TABLES
        ),
    ),
    # Full-text statistics per partition, kept in the writing transaction.
    Migration("0012_text_stats", _text_stats()),
    # Each partition's document frequency per word and its postings, kept by the writes.
    Migration("0013_text_terms", text_terms_schema(RECORD_TABLES, _security)),
    # A record's vector stays in its row rather than in the table's TOAST storage (where a
    # row with a text and its part vectors put it): an exact nearest search reads one page
    # per few rows instead of an index lookup and a page per row. Rows written before move
    # in when rewritten (VACUUM FULL); until then they are read as before.
    Migration(
        "0014_vectors_in_rows",
        tuple(
            f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE MAIN"
            for table in RECORD_TABLES
        ),
    ),
    # One trigger keeps a write's full-text statistics, and skips updates of other fields.
    Migration("0015_text_index_trigger", text_index_schema(RECORD_TABLES, _stats_add, _stats_take)),
    # The same isolation, its settings read once per statement rather than once per row.
    Migration(
        "0016_policies_read_context_once",
        tuple(
            _policy_read_once(table)
            for table in (*TENANT_TABLES, "text_stats", "text_terms", "text_postings")
        ),
    ),
    # The full-text trigger looks a write's words up by key, however its plans were made.
    Migration("0017_text_index_lookups", TEXT_INDEX_LOOKUPS),
    # A process holding a partition's vectors asks for its tenant's events since the last
    # position it saw: a few index entries, however long the tenant's log.
    Migration(
        "0018_events_by_tenant_position",
        (
            "CREATE INDEX events_by_tenant_position ON events (tenant_uuid, position)",
            "DROP INDEX events_by_tenant",
        ),
    ),
    # A full-text hit is scored from the postings that found it, not its record's words.
    Migration("0019_posting_counts", posting_counts_schema(RECORD_TABLES, _stats_add, _stats_take)),
)
