-- Click counts clustered by code (WITHOUT ROWID): the flush upserts one small row per clicked
-- code each interval, into one B-tree instead of a rowid table plus an index on code.
-- (The links table stays a rowid table: its rows are larger and its codes random, and
-- clustering it by code measured slower for inserts, see docs/benchmarks.md.)
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
