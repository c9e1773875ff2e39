-- Links. Codes compare byte-wise (COLLATE "C"): `aB3xY9z` and `Ab3Xy9Z` are different codes.
CREATE TABLE links (
    code        text COLLATE "C" PRIMARY KEY,
    long_url    text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('generated', 'private', 'alias')),
    id          bigint NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NULL,
    deleted_at  timestamptz NULL,
    owner       text NOT NULL,
    -- SHA-256 of (owner, url, expiry) for dedup creates; cleared when the link is deleted.
    dedup_key   bytea NULL UNIQUE
);

-- One generated ID maps to one code: a second row for the same ID would mean an ID was reused.
CREATE UNIQUE INDEX links_generated_id ON links (id) WHERE id IS NOT NULL;

-- Idempotency keys: a retried create with the same key returns the first link.
CREATE TABLE idempotency_keys (
    owner       text NOT NULL,
    key         text NOT NULL,
    fingerprint bytea NOT NULL,
    code        text COLLATE "C" NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (owner, key)
);
