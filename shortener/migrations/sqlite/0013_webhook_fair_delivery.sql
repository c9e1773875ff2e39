-- Fair webhook delivery. A worker claims an endpoint (a lease on the endpoint row) and then a
-- few of its due deliveries, so one endpoint is delivered to by one worker at a time and a slow
-- or hanging endpoint holds up only its own queue. Its due deliveries are found in order of
-- their time without walking the endpoint's delivered log. The index of all pending
-- deliveries by time goes: it served the old claim, nothing reads by it now, and on
-- PostgreSQL the planner took it over the per-endpoint one and walked every other endpoint's
-- deliveries (migration 12 there); one index fewer per recorded delivery here too.
ALTER TABLE webhook_endpoints ADD COLUMN leased_until INTEGER NULL;
CREATE INDEX webhook_deliveries_endpoint_due ON webhook_deliveries (endpoint_id, next_at, event_id)
    WHERE state = 'pending';
DROP INDEX webhook_deliveries_due;

-- The outbox has a per-tenant bound. The delivery worker measures each tenant's pending
-- deliveries and lists here the tenants at the bound; an event of a listed tenant is not
-- recorded (the change that caused it still commits) and is counted in `webhook_dropped`, which
-- the worker reads into its metrics and empties.
CREATE TABLE webhook_full_tenants (
    tenant TEXT PRIMARY KEY,
    since  INTEGER NOT NULL
) STRICT;
CREATE TABLE webhook_dropped (
    id     INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL
) STRICT;

-- A trigger, so every path that records events (creates, updates, deletes, the hourly rollup)
-- keeps the bound alike. An event already recorded (a rollup asked for again) is left to its
-- `ON CONFLICT` and not counted.
CREATE TRIGGER webhook_events_bound BEFORE INSERT ON webhook_events
WHEN EXISTS (SELECT 1 FROM webhook_full_tenants WHERE tenant = NEW.tenant)
    AND (NEW.dedup IS NULL OR NOT EXISTS (SELECT 1 FROM webhook_events WHERE dedup = NEW.dedup))
BEGIN
    INSERT INTO webhook_dropped (tenant) VALUES (NEW.tenant);
    SELECT RAISE(IGNORE);
END;
