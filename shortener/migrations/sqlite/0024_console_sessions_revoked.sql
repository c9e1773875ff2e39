-- Signed-out sessions are purged a day after their sign-out (the purge reads them by
-- `revoked_at`); live ones, the most, are left out of the index.
CREATE INDEX console_sessions_revoked ON console_sessions (revoked_at)
    WHERE revoked_at IS NOT NULL;
