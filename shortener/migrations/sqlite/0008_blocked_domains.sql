-- Target domains blocked through the admin API (besides the blocklist file). Times are UNIX
-- milliseconds.
CREATE TABLE blocked_domains (
    entry    TEXT PRIMARY KEY,
    added_at INTEGER NOT NULL,
    added_by TEXT NOT NULL
) STRICT;
