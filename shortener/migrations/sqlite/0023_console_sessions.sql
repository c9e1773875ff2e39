-- The console's sign-in sessions (OpenID Connect). The cookie's value is never stored: only its
-- SHA-256. `claims` keeps the ID token's claims the roles file may name, so a change of the
-- roles file applies to open sessions. Times are UNIX milliseconds.
CREATE TABLE console_sessions (
    id           INTEGER PRIMARY KEY,
    digest       BLOB NOT NULL UNIQUE CHECK (length(digest) = 32),
    subject      TEXT NOT NULL,
    email        TEXT,
    name         TEXT,
    claims       TEXT NOT NULL,
    tenant       TEXT,
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    revoked_at   INTEGER
) STRICT;

CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
