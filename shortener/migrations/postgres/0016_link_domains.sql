-- Links belong to a domain: `domain` is the host of the branded domain a link answers on, NULL
-- for the default domain (the node's public host and its short domains), which is what every
-- link made before domains existed keeps, so each answers on the hosts it answered on.
--
-- Uniqueness stays with the keys the code column already holds (docs/design.md, I2): an alias
-- on a branded domain is stored under the key `host/alias`, which no other domain's alias and
-- no code of another shape can equal, so `links_named_code` (or the code primary key of the
-- older layout) makes aliases unique per domain; a code of generated or private shape is its
-- own key on every domain and stays unique across all of them.
ALTER TABLE links ADD COLUMN domain text COLLATE "C" NULL;

-- A domain's links, newest first: the list filter by domain, and the check that a domain to
-- be removed holds no live link. Only branded links are in it, so default-domain creates pay
-- nothing for it.
CREATE INDEX links_domain ON links (domain, created_at DESC, code DESC) WHERE domain IS NOT NULL;
