-- Webhooks: endpoints registered per tenant, and a durable outbox. An event is recorded in the
-- same transaction as the change it tells of (so none is lost or invented by a crash), with
-- one delivery row per enabled endpoint of its tenant; the delivery rows are also each
-- endpoint's delivery log. Times are Unix milliseconds.
CREATE TABLE webhook_endpoints (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant      TEXT NOT NULL,
    url         TEXT NOT NULL,
    secret      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    created_by  TEXT NOT NULL,
    failures    INTEGER NOT NULL DEFAULT 0,
    disabled_at INTEGER NULL
) STRICT;
CREATE INDEX webhook_endpoints_tenant ON webhook_endpoints (tenant) WHERE disabled_at IS NULL;

CREATE TABLE webhook_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    data       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    dedup      TEXT NULL UNIQUE
) STRICT;

CREATE TABLE webhook_deliveries (
    endpoint_id   INTEGER NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id      INTEGER NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    state         TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered')),
    attempts      INTEGER NOT NULL DEFAULT 0,
    next_at       INTEGER NOT NULL,
    leased_until  INTEGER NULL,
    last_status   INTEGER NULL,
    last_error    TEXT NULL,
    delivered_at  INTEGER NULL,
    PRIMARY KEY (endpoint_id, event_id)
) STRICT;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE state = 'pending';
