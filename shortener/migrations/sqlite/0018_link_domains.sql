-- Links belong to a domain: `domain` is the host of the branded domain a link answers on, NULL
-- for the default domain, which every link made before domains existed keeps. Uniqueness stays
-- with the keys in `code` (an alias on a branded domain is stored as `host/alias`; see
-- docs/design.md, I2).
ALTER TABLE links ADD COLUMN domain TEXT NULL;

-- A domain's links, newest first (the list filter, and the check before a domain is removed).
CREATE INDEX links_domain ON links (domain, created_at DESC, code DESC) WHERE domain IS NOT NULL;
