-- Links clustered by code. A rowid table with `code TEXT PRIMARY KEY` keeps two B-trees (the rows
-- by rowid and an index on code), and `dedup_key UNIQUE` indexes every row, NULL keys included.
-- WITHOUT ROWID stores the rows in code order, so a lookup by code reads one B-tree, and the
-- dedup index now holds only the rows that have a key: a generated create writes two B-trees
-- (links and links_generated_id) instead of four.
CREATE TABLE links_by_code (
    code        TEXT PRIMARY KEY,
    long_url    TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('generated', 'private', 'alias')),
    id          INTEGER NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NULL,
    deleted_at  INTEGER NULL,
    owner       TEXT NOT NULL,
    dedup_key   BLOB NULL
) STRICT, WITHOUT ROWID;

INSERT INTO links_by_code (code, long_url, kind, id, created_at, expires_at, deleted_at, owner, dedup_key)
SELECT code, long_url, kind, id, created_at, expires_at, deleted_at, owner, dedup_key FROM links;

DROP TABLE links;
ALTER TABLE links_by_code RENAME TO links;

CREATE UNIQUE INDEX links_generated_id ON links (id) WHERE id IS NOT NULL;
CREATE UNIQUE INDEX links_dedup_key ON links (dedup_key) WHERE dedup_key IS NOT NULL;

-- Click counts the same way: the flush upserts one row per clicked code each interval, into one
-- B-tree instead of a rowid table plus an index on code.
CREATE TABLE link_clicks_by_code (
    code   TEXT PRIMARY KEY,
    human  INTEGER NOT NULL DEFAULT 0,
    head   INTEGER NOT NULL DEFAULT 0,
    bot    INTEGER NOT NULL DEFAULT 0
) STRICT, WITHOUT ROWID;

INSERT INTO link_clicks_by_code (code, human, head, bot)
SELECT code, human, head, bot FROM link_clicks;

DROP TABLE link_clicks;
ALTER TABLE link_clicks_by_code RENAME TO link_clicks;
