-- The audit log: one row per change to a tenant's links, domains, API keys, webhooks or the
-- blocklist (and sign-ins), naming who made it (the key, and the person when one signed in),
-- from which client address, to what, and a bounded summary of what changed (never a secret).
-- Rows are removed after the retention period by a bounded periodic purge, oldest first.
CREATE TABLE audit_log (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT now(),
    tenant        text COLLATE "C" NOT NULL,
    actor_tenant  text COLLATE "C" NOT NULL,
    actor_key     text COLLATE "C" NOT NULL,
    actor_subject text COLLATE "C",
    actor_email   text COLLATE "C",
    address       text,
    action        text COLLATE "C" NOT NULL,
    object_kind   text COLLATE "C" NOT NULL,
    object_id     text COLLATE "C" NOT NULL,
    change        jsonb NOT NULL
);

-- A tenant's entries, newest first by keyset (the id orders them as they were committed
-- closely enough for reading; `at` is the store's clock).
CREATE INDEX audit_log_tenant ON audit_log (tenant, id);
-- One object's entries (a link's code, a host), newest first.
CREATE INDEX audit_log_object ON audit_log (object_id, id);
-- The purge finds the oldest entries.
CREATE INDEX audit_log_at ON audit_log (at);
