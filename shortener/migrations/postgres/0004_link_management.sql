-- Link management: disable, visit limits, tags, a target host to filter by, imported codes,
-- and the history of every change.
ALTER TABLE links ADD COLUMN disabled_at timestamptz NULL;
ALTER TABLE links ADD COLUMN max_visits bigint NULL CHECK (max_visits > 0);
ALTER TABLE links ADD COLUMN tags text[] NOT NULL DEFAULT '{}';
-- The target's host with its labels reversed (`www.example.com` -> `com.example.www`), so that
-- "this domain and its subdomains" is a prefix match an index answers.
ALTER TABLE links ADD COLUMN host_rev text COLLATE "C" NOT NULL DEFAULT '';
-- The import that brought the link from another shortener (its code is the legacy one, kept
-- as it was spelled); NULL for links made here. Tells a code repeated within one import from
-- one an earlier import already brought.
ALTER TABLE links ADD COLUMN import_batch bigint NULL;

UPDATE links SET host_rev = array_to_string(ARRAY(
    SELECT label FROM unnest(string_to_array(lower(substring(long_url FROM '^[a-z]+://([^/:?#]+)')), '.'))
        WITH ORDINALITY AS t(label, n) ORDER BY n DESC), '.');

-- Lists: newest first, per tenant and across tenants (admin), by keyset.
CREATE INDEX links_tenant_created ON links (tenant, created_at DESC, code DESC);
CREATE INDEX links_created ON links (created_at DESC, code DESC);
-- A host filter within a tenant: the host's rows, newest first (a suffix match reads a range).
CREATE INDEX links_tenant_host ON links (tenant, host_rev, created_at DESC, code DESC);
-- Substring search of target URLs.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX links_url_trgm ON links USING gin (long_url gin_trgm_ops);

-- Tag filters: one row per (link, tag), ordered as the lists are.
CREATE TABLE link_tags (
    tenant     text NOT NULL,
    tag        text NOT NULL,
    created_at timestamptz NOT NULL,
    code       text COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, tag, created_at, code)
);

-- Every change after a link's creation (the creation itself is the link row): who made it,
-- when, and what changed (old and new values). Written in the change's own transaction.
CREATE TABLE link_events (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    code   text COLLATE "C" NOT NULL,
    at     timestamptz NOT NULL DEFAULT now(),
    key    text NOT NULL,
    kind   text NOT NULL CHECK (kind IN ('update', 'disable', 'enable', 'delete')),
    change jsonb NOT NULL
);
CREATE INDEX link_events_code ON link_events (code, id);
