-- The audit log: one row per change to a tenant's links, domains, API keys, webhooks or the
-- blocklist (and sign-ins), naming who made it (the key, and the person when one signed in),
-- from which client address, to what, and a bounded summary of what changed (never a secret).
-- Rows are removed after the retention period by a bounded periodic purge. Times are UNIX
-- milliseconds; `change` is JSON text.
CREATE TABLE audit_log (
    id            INTEGER PRIMARY KEY,
    at            INTEGER NOT NULL,
    tenant        TEXT NOT NULL,
    actor_tenant  TEXT NOT NULL,
    actor_key     TEXT NOT NULL,
    actor_subject TEXT,
    actor_email   TEXT,
    address       TEXT,
    action        TEXT NOT NULL,
    object_kind   TEXT NOT NULL,
    object_id     TEXT NOT NULL,
    change        TEXT NOT NULL
) STRICT;

CREATE INDEX audit_log_tenant ON audit_log (tenant, id);
CREATE INDEX audit_log_object ON audit_log (object_id, id);
CREATE INDEX audit_log_at ON audit_log (at);
