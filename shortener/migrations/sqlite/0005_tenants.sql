-- Links belong to a tenant. Every link made before tenants existed belongs to `default`, the
-- tenant of keys configured without one. `owner` keeps the name of the key that created it.
ALTER TABLE links ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';

-- Idempotency keys are kept per tenant (they were per API key). Where two keys claimed the same
-- idempotency key, the newest claim stays.
DELETE FROM idempotency_keys WHERE rowid NOT IN (
    SELECT rowid FROM (
        SELECT rowid, row_number() OVER (PARTITION BY key ORDER BY created_at DESC, rowid DESC) AS n
        FROM idempotency_keys
    ) WHERE n = 1
);
ALTER TABLE idempotency_keys RENAME COLUMN owner TO tenant;
UPDATE idempotency_keys SET tenant = 'default';

-- Claims expire; the purge finds the old ones by age.
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
