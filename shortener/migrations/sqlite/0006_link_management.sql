-- Link management: disable, visit limits, tags, a target host to filter by, imported codes,
-- and the history of every change. Times are UNIX milliseconds.
ALTER TABLE links ADD COLUMN disabled_at INTEGER NULL;
ALTER TABLE links ADD COLUMN max_visits INTEGER NULL CHECK (max_visits IS NULL OR max_visits > 0);
-- A JSON array of tags.
ALTER TABLE links ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';
-- The target's host with its labels reversed (`www.example.com` -> `com.example.www`); filled
-- for existing rows by the node on its first start after this migration.
ALTER TABLE links ADD COLUMN host_rev TEXT NOT NULL DEFAULT '';
-- The import that brought the link from another shortener; NULL for links made here.
ALTER TABLE links ADD COLUMN import_batch INTEGER NULL;

-- Lists: newest first, per tenant and across tenants (admin), by keyset.
CREATE INDEX links_tenant_created ON links (tenant, created_at DESC, code DESC);
CREATE INDEX links_created ON links (created_at DESC, code DESC);
CREATE INDEX links_tenant_host ON links (tenant, host_rev, created_at DESC, code DESC);

CREATE TABLE link_tags (
    tenant     TEXT NOT NULL,
    tag        TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    code       TEXT NOT NULL,
    PRIMARY KEY (tenant, tag, created_at, code)
) STRICT, WITHOUT ROWID;

CREATE TABLE link_events (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    code   TEXT NOT NULL,
    at     INTEGER NOT NULL,
    key    TEXT NOT NULL,
    kind   TEXT NOT NULL CHECK (kind IN ('update', 'disable', 'enable', 'delete')),
    change TEXT NOT NULL
) STRICT;
CREATE INDEX link_events_code ON link_events (code, id);
