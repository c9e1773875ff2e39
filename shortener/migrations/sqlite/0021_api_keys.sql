-- API keys tenant admins make through the API (besides the operator's keys file): only the
-- SHA-256 of each secret is kept. A revoked key keeps its row (revoked_at set), so its name is
-- free again for a new key. Times are UNIX milliseconds.
CREATE TABLE api_keys (
    id           INTEGER PRIMARY KEY,
    tenant       TEXT NOT NULL,
    name         TEXT NOT NULL,
    digest       BLOB NOT NULL UNIQUE CHECK (length(digest) = 32),
    scopes       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    created_by   TEXT NOT NULL,
    expires_at   INTEGER,
    last_used_at INTEGER,
    revoked_at   INTEGER
) STRICT;

-- One live key per name in a tenant; the list's order.
CREATE UNIQUE INDEX api_keys_live_name ON api_keys (tenant, name) WHERE revoked_at IS NULL;
