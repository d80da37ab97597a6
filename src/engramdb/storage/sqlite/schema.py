"""The SQLite schema as named, append-only migrations."""

from __future__ import annotations

from engramdb.storage.migrations import Migration
from engramdb.storage.sqlite.partition import PARTITION_TOKEN_SQL

#: Counts every partition's records afresh (after a rebuild; any stale row is replaced).
RECOUNT_TEXT_STATS = (
    "INSERT OR REPLACE INTO text_stats (part, docs) "
    "SELECT part, count(*) FROM records GROUP BY part"
)

# What a record adds to its partition's full-text statistics (``text_stats``, ``text_terms``),
# and takes away again; the words are the index's own (``text_tokens.py``).
_ADD_TEXT = """
    INSERT INTO text_stats (part, docs, tokens) VALUES ({r}.part, 1, engram_text_tokens({r}.text))
    ON CONFLICT (part) DO UPDATE SET docs = docs + 1, tokens = tokens + excluded.tokens;
    INSERT INTO text_terms (part, term, docs)
    SELECT {r}.part, value, 1 FROM json_each(engram_text_terms({r}.text)) WHERE true
    ON CONFLICT (part, term) DO UPDATE SET docs = docs + 1;"""
_REMOVE_TEXT = """
    UPDATE text_stats SET docs = docs - 1, tokens = tokens - engram_text_tokens({r}.text)
    WHERE part = {r}.part;
    UPDATE text_terms SET docs = docs - 1 WHERE part = {r}.part
    AND term IN (SELECT value FROM json_each(engram_text_terms({r}.text)));
    DELETE FROM text_terms WHERE part = {r}.part AND docs <= 0
    AND term IN (SELECT value FROM json_each(engram_text_terms({r}.text)));"""
# A record's term counts (``text_counts``), for a text whose counts pay (``counts_pay``).
_PUT_COUNTS = """INSERT INTO text_counts (record_id, counts) SELECT new.id, counts
                 FROM (SELECT engram_text_counts(new.text) AS counts) WHERE counts IS NOT NULL;"""
#: Each partition's record count, term count and words afresh, from its records (for the
#: migration that adds them).
_COUNT_TEXT = (
    "INSERT OR REPLACE INTO text_stats (part, docs, tokens) "
    "SELECT part, count(*), total(engram_text_tokens(text)) FROM records GROUP BY part",
    "INSERT INTO text_terms (part, term, docs) SELECT part, words.value, count(*) "
    "FROM records, json_each(engram_text_terms(records.text)) AS words GROUP BY 1, 2",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "0001_event_log",
        (
            """CREATE TABLE events (
                position INTEGER PRIMARY KEY AUTOINCREMENT,
                event_id TEXT NOT NULL UNIQUE,
                event_type TEXT NOT NULL,
                schema_version INTEGER NOT NULL,
                occurred_at TEXT NOT NULL,
                producer TEXT NOT NULL,
                trace TEXT NOT NULL,
                tenant TEXT NOT NULL,
                user_id TEXT NOT NULL,
                agent TEXT NOT NULL,
                session TEXT NOT NULL,
                plan TEXT NOT NULL,
                provider_id TEXT NOT NULL,
                payload TEXT NOT NULL CHECK (json_valid(payload))
            )""",
            "CREATE INDEX events_by_type ON events (event_type, position)",
            "CREATE INDEX events_by_scope ON events (tenant, user_id, agent, position)",
            "CREATE INDEX events_by_provider ON events (provider_id, position)",
            # The log is append-only: history is never edited in place.
            """CREATE TRIGGER events_append_only BEFORE UPDATE ON events
               BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END""",
        ),
    ),
    Migration(
        "0002_records",
        (
            """CREATE TABLE records (
                id INTEGER PRIMARY KEY,
                namespace TEXT NOT NULL,
                tenant TEXT NOT NULL,
                user_id TEXT NOT NULL,
                agent TEXT NOT NULL,
                session TEXT NOT NULL,
                plan TEXT NOT NULL,
                key TEXT NOT NULL,
                value TEXT NOT NULL CHECK (json_valid(value)),
                content_type TEXT NOT NULL,
                metadata TEXT NOT NULL CHECK (json_valid(metadata)),
                text TEXT NOT NULL,
                created_at TEXT NOT NULL,
                updated_at TEXT,
                ttl_ms INTEGER,
                expires_at TEXT,
                UNIQUE (namespace, tenant, user_id, agent, session, plan, key)
            )""",
            "CREATE INDEX records_by_content_type ON records (namespace, tenant, content_type)",
            "CREATE INDEX records_by_expiry ON records (expires_at) WHERE expires_at IS NOT NULL",
        ),
    ),
    Migration(
        "0003_search_indexes",
        (
            "ALTER TABLE records ADD COLUMN thread TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE records ADD COLUMN occurred_at TEXT",
            """CREATE INDEX records_by_thread ON records
               (namespace, tenant, user_id, agent, session, plan, thread, created_at)""",
            # Full-text index over records.text (external content: the text is stored once).
            # Porter stemming lets "lives" find "living"; diacritics are folded.
            """CREATE VIRTUAL TABLE records_fts USING fts5(
                text, content='records', content_rowid='id',
                tokenize='porter unicode61 remove_diacritics 2')""",
            "INSERT INTO records_fts (records_fts) VALUES ('rebuild')",
            # Triggers keep the index in the same transaction as every record change.
            """CREATE TRIGGER records_fts_insert AFTER INSERT ON records BEGIN
                 INSERT INTO records_fts (rowid, text) VALUES (new.id, new.text);
               END""",
            """CREATE TRIGGER records_fts_delete AFTER DELETE ON records BEGIN
                 INSERT INTO records_fts (records_fts, rowid, text)
                 VALUES ('delete', old.id, old.text);
               END""",
            """CREATE TRIGGER records_fts_update AFTER UPDATE OF text ON records BEGIN
                 INSERT INTO records_fts (records_fts, rowid, text)
                 VALUES ('delete', old.id, old.text);
                 INSERT INTO records_fts (rowid, text) VALUES (new.id, new.text);
               END""",
            """CREATE TABLE vectors (
                record_id INTEGER PRIMARY KEY REFERENCES records (id) ON DELETE CASCADE,
                model TEXT NOT NULL,
                vector BLOB NOT NULL
            )""",
        ),
    ),
    Migration(
        "0004_forgetting",
        (
            # Soft-forgotten records stay, hidden from every read until restored.
            "ALTER TABLE records ADD COLUMN hidden_at TEXT",
            # The log stays append-only, with one exception: a hard forget may blank the
            # payload of an event to a tombstone (payload.redacted = 1), changing nothing else.
            "DROP TRIGGER events_append_only",
            """CREATE TRIGGER events_append_only BEFORE UPDATE ON events
               WHEN NOT (
                   NEW.position = OLD.position AND NEW.event_id = OLD.event_id
                   AND NEW.event_type = OLD.event_type
                   AND NEW.schema_version = OLD.schema_version
                   AND NEW.occurred_at = OLD.occurred_at AND NEW.producer = OLD.producer
                   AND NEW.trace = OLD.trace AND NEW.tenant = OLD.tenant
                   AND NEW.user_id = OLD.user_id AND NEW.agent = OLD.agent
                   AND NEW.session = OLD.session AND NEW.plan = OLD.plan
                   AND NEW.provider_id = OLD.provider_id
                   AND json_extract(NEW.payload, '$.redacted') IS 1
               )
               BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END""",
            "CREATE INDEX events_by_key ON events (provider_id, json_extract(payload, '$.key'))",
        ),
    ),
    Migration(
        "0005_fts_partitions",
        (
            # One full-text index serves every namespace and scope. Each document also holds
            # one token naming its partition, so a search ANDs with it and scores only the
            # partition's matches instead of every match in the file (see ``partition_token``).
            f"ALTER TABLE records ADD COLUMN part TEXT GENERATED ALWAYS AS ({PARTITION_TOKEN_SQL})"
            " VIRTUAL",
            "DROP TRIGGER records_fts_insert",
            "DROP TRIGGER records_fts_delete",
            "DROP TRIGGER records_fts_update",
            "DROP TABLE records_fts",
            """CREATE VIRTUAL TABLE records_fts USING fts5(
                text, part, content='records', content_rowid='id',
                tokenize='porter unicode61 remove_diacritics 2')""",
            "INSERT INTO records_fts (records_fts) VALUES ('rebuild')",
            """CREATE TRIGGER records_fts_insert AFTER INSERT ON records BEGIN
                 INSERT INTO records_fts (rowid, text, part) VALUES (new.id, new.text, new.part);
               END""",
            """CREATE TRIGGER records_fts_delete AFTER DELETE ON records BEGIN
                 INSERT INTO records_fts (records_fts, rowid, text, part)
                 VALUES ('delete', old.id, old.text, old.part);
               END""",
            """CREATE TRIGGER records_fts_update AFTER UPDATE OF text ON records BEGIN
                 INSERT INTO records_fts (records_fts, rowid, text, part)
                 VALUES ('delete', old.id, old.text, old.part);
                 INSERT INTO records_fts (rowid, text, part) VALUES (new.id, new.text, new.part);
               END""",
        ),
    ),
    Migration(
        "0006_part_vectors",
        # A record's sentences may have vectors of their own, stored beside its whole-text one.
        ("ALTER TABLE vectors ADD COLUMN parts BLOB",),
    ),
    Migration(
        "0007_record_versions",
        # Every write of a record counts one version, so a writer can say which one it read.
        # Records stored before start at 1; a rebuild counts their writes from the log.
        ("ALTER TABLE records ADD COLUMN version INTEGER NOT NULL DEFAULT 1",),
    ),
    Migration(
        "0008_text_stats",
        # Each partition's record count, kept by the writing transaction, so that full-text
        # statistics never read another partition's records (nor count the whole index).
        (
            "CREATE TABLE text_stats (part TEXT PRIMARY KEY, docs INTEGER NOT NULL) WITHOUT ROWID",
            """CREATE TRIGGER records_stats_insert AFTER INSERT ON records BEGIN
                 INSERT INTO text_stats (part, docs) VALUES (new.part, 1)
                 ON CONFLICT (part) DO UPDATE SET docs = docs + 1;
               END""",
            """CREATE TRIGGER records_stats_delete AFTER DELETE ON records BEGIN
                 UPDATE text_stats SET docs = docs - 1 WHERE part = old.part;
               END""",
            """CREATE TRIGGER records_stats_update
               AFTER UPDATE OF namespace, tenant, user_id, agent, session, plan ON records
               WHEN old.part IS NOT new.part BEGIN
                 UPDATE text_stats SET docs = docs - 1 WHERE part = old.part;
                 INSERT INTO text_stats (part, docs) VALUES (new.part, 1)
                 ON CONFLICT (part) DO UPDATE SET docs = docs + 1;
               END""",
            RECOUNT_TEXT_STATS,
        ),
    ),
    Migration(
        "0009_text_terms",
        # Each partition's term count and, per term, how many of its records hold it, kept by
        # the writing transaction: BM25 reads its document frequencies and mean length from
        # them (one row each), never from another partition's records nor by counting.
        (
            "ALTER TABLE text_stats ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0",
            """CREATE TABLE text_terms (
                part TEXT NOT NULL,
                term TEXT NOT NULL,
                docs INTEGER NOT NULL,
                PRIMARY KEY (part, term)
            ) WITHOUT ROWID""",
            "DROP TRIGGER records_stats_insert",
            "DROP TRIGGER records_stats_delete",
            "DROP TRIGGER records_stats_update",
            f"""CREATE TRIGGER records_stats_insert AFTER INSERT ON records BEGIN
                 {_ADD_TEXT.format(r="new")}
               END""",
            f"""CREATE TRIGGER records_stats_delete AFTER DELETE ON records BEGIN
                 {_REMOVE_TEXT.format(r="old")}
               END""",
            f"""CREATE TRIGGER records_stats_update
               AFTER UPDATE OF text, namespace, tenant, user_id, agent, session, plan ON records
               WHEN old.part IS NOT new.part OR old.text IS NOT new.text BEGIN
                 {_REMOVE_TEXT.format(r="old")}
                 {_ADD_TEXT.format(r="new")}
               END""",
            "DELETE FROM text_stats",
            *_COUNT_TEXT,
        ),
    ),
    Migration(
        "0010_text_counts",
        # Each long or non-ASCII record's term counts, kept by the writing transaction (which
        # tokenizes its text once for ``text_terms`` already): BM25 reads a candidate's counts
        # of the query's words instead of tokenizing its text again at every search.
        (
            "CREATE TABLE text_counts (record_id INTEGER PRIMARY KEY, counts TEXT NOT NULL)",
            f"""CREATE TRIGGER records_counts_insert AFTER INSERT ON records BEGIN
                 {_PUT_COUNTS}
               END""",
            """CREATE TRIGGER records_counts_delete AFTER DELETE ON records BEGIN
                 DELETE FROM text_counts WHERE record_id = old.id;
               END""",
            f"""CREATE TRIGGER records_counts_update AFTER UPDATE OF id, text ON records
               WHEN old.id IS NOT new.id OR old.text IS NOT new.text BEGIN
                 DELETE FROM text_counts WHERE record_id = old.id;
                 {_PUT_COUNTS}
               END""",
            "INSERT INTO text_counts (record_id, counts) SELECT id, counts "
            "FROM (SELECT id, engram_text_counts(text) AS counts FROM records) "
            "WHERE counts IS NOT NULL",
        ),
    ),
)
