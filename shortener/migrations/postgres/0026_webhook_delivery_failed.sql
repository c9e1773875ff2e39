-- A delivery that fails `SHORTENER_WEBHOOK_MAX_ATTEMPTS` times ends `failed`: it is not tried
-- again, and leaves the log with the delivered ones once it is older than the log's retention.
-- Before, a delivery its receiver always refused was retried (an attempt an hour) for as long
-- as the endpoint stayed enabled, and held a place in the tenant's pending bound meanwhile.
-- The wider constraint is added without a scan under the table's lock, then validated (every
-- row met the narrower one).
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_state_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_state_check
    CHECK (state IN ('pending', 'delivered', 'failed')) NOT VALID;
ALTER TABLE webhook_deliveries VALIDATE CONSTRAINT webhook_deliveries_state_check;
ALTER TABLE webhook_deliveries ADD COLUMN failed_at timestamptz NULL;
CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (failed_at) WHERE state = 'failed';
