-- API keys tenant admins make through the API (besides the operator's keys file): only the
-- SHA-256 of each secret is kept. A revoked key keeps its row (revoked_at set), so its name is
-- free again for a new key, which the partial unique index allows, while the row still says
-- who made it and when. Every node re-reads the live keys each reload interval.
CREATE TABLE api_keys (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant       text COLLATE "C" NOT NULL,
    name         text COLLATE "C" NOT NULL,
    digest       bytea NOT NULL UNIQUE CHECK (length(digest) = 32),
    scopes       text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    created_by   text NOT NULL,
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz
);

-- One live key per name in a tenant; the list's order.
CREATE UNIQUE INDEX api_keys_live_name ON api_keys (tenant, name) WHERE revoked_at IS NULL;
