-- Links belong to a tenant. Every link made before tenants existed belongs to `default`, the
-- tenant of keys configured without one (so a setup of those keys sees exactly what it saw).
-- `owner` keeps the name of the key that created the link.
ALTER TABLE links ADD COLUMN tenant text NOT NULL DEFAULT 'default';
ALTER TABLE links ALTER COLUMN tenant DROP DEFAULT;

-- Idempotency keys are kept per tenant (they were per API key). Where two keys claimed the same
-- idempotency key, the newest claim stays.
DELETE FROM idempotency_keys a USING idempotency_keys b
WHERE a.key = b.key AND (a.created_at, a.owner) < (b.created_at, b.owner);
ALTER TABLE idempotency_keys RENAME COLUMN owner TO tenant;
UPDATE idempotency_keys SET tenant = 'default';

-- Claims expire; the purge finds the old ones by age.
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
