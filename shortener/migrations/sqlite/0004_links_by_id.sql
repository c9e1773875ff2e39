-- Generated links are stored at the row number of their ID; only named codes (aliases and
-- private codes) keep an index on the code.
--
-- A generated code is a keyed permutation of its ID, so its place in a code-ordered index is
-- random: every create dirtied one page somewhere in that index, which SQLite writes to the WAL
-- and again at checkpoint. Keyed by ID, a create appends to the end of the table instead, and a
-- lookup decodes the code to its ID first. The code space that makes this sound (one key, one
-- base length per file) is recorded in `code_space` and checked at every start
-- (see docs/shortener.md, "Embedded storage").
--
-- `slot` is the rowid: the ID for rows that have one, a negative number for the rest.
CREATE TABLE links_by_slot (
    slot        INTEGER PRIMARY KEY,
    code        TEXT NOT NULL,
    long_url    TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('generated', 'private', 'alias')),
    id          INTEGER NULL CHECK (id IS NULL OR id = slot),
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NULL,
    deleted_at  INTEGER NULL,
    owner       TEXT NOT NULL,
    dedup_key   BLOB NULL,
    CHECK ((id IS NULL) = (slot < 0))
) STRICT;

-- Rows without an ID are numbered -1, -2, ... in their old order.
INSERT INTO links_by_slot (slot, code, long_url, kind, id, created_at, expires_at, deleted_at, owner, dedup_key)
SELECT coalesce(id, -(row_number() OVER (PARTITION BY id IS NULL ORDER BY rowid))),
       code, long_url, kind, id, created_at, expires_at, deleted_at, owner, dedup_key
FROM links ORDER BY rowid;

DROP TABLE links;
ALTER TABLE links_by_slot RENAME TO links;

-- Codes without an ID are unique among themselves; a generated code is unique because its ID
-- is (the store also refuses an ID-less row whose code a generated row already holds, and the
-- reverse).
CREATE UNIQUE INDEX links_named_code ON links (code) WHERE id IS NULL;

-- Only dedup creates carry a key; the others no longer add an entry to this index.
CREATE UNIQUE INDEX links_dedup_key ON links (dedup_key) WHERE dedup_key IS NOT NULL;

-- The code space the generated rows were made in: written once, compared at every start.
CREATE TABLE code_space (
    only        INTEGER PRIMARY KEY CHECK (only = 1),
    fingerprint TEXT NOT NULL,
    length      INTEGER NOT NULL
) STRICT;
