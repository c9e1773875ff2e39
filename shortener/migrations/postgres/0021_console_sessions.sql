-- The console's sign-in sessions (OpenID Connect). The cookie's value is never stored: only its
-- SHA-256, so a copy of the table opens no session. Every request made with a session reads its
-- row, so a revocation (sign-out) holds on every node at once. `claims` keeps the ID token's
-- claims the roles file may name, so a change of the roles file applies to open sessions.
CREATE TABLE console_sessions (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    digest       bytea NOT NULL UNIQUE CHECK (length(digest) = 32),
    subject      text NOT NULL,
    email        text,
    name         text,
    claims       text NOT NULL,
    tenant       text COLLATE "C",
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz
);

-- Old rows are removed by time.
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
