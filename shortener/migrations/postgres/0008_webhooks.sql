-- Webhooks: endpoints registered per tenant, and a durable outbox. An event is recorded in the
-- same transaction as the change it tells of (so none is lost or invented by a crash), with
-- one delivery row per enabled endpoint of its tenant; the delivery rows are also each
-- endpoint's delivery log.
CREATE TABLE webhook_endpoints (
    id          bigserial PRIMARY KEY,
    tenant      text NOT NULL,
    url         text NOT NULL,
    secret      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    created_by  text NOT NULL,
    -- Consecutive failed deliveries; at the configured limit the endpoint is disabled.
    failures    integer NOT NULL DEFAULT 0,
    disabled_at timestamptz NULL
);
CREATE INDEX webhook_endpoints_tenant ON webhook_endpoints (tenant) WHERE disabled_at IS NULL;

CREATE TABLE webhook_events (
    id         bigserial PRIMARY KEY,
    tenant     text NOT NULL,
    kind       text NOT NULL,
    data       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- Events made by every node alike (the hourly rollup summary) are recorded once.
    dedup      text NULL UNIQUE
);

CREATE TABLE webhook_deliveries (
    endpoint_id   bigint NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_id      bigint NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    state         text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered')),
    attempts      integer NOT NULL DEFAULT 0,
    next_at       timestamptz NOT NULL DEFAULT now(),
    -- A node delivering it holds it until then; another node may take it over after.
    leased_until  timestamptz NULL,
    last_status   integer NULL,
    last_error    text NULL,
    delivered_at  timestamptz NULL,
    PRIMARY KEY (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE state = 'pending';
