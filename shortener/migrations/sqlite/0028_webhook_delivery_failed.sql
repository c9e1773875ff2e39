-- A delivery that fails `SHORTENER_WEBHOOK_MAX_ATTEMPTS` times ends `failed` (see the
-- PostgreSQL migration of the same name). The table's CHECK on `state` is widened in the
-- schema's text after this runs (store/sqlite/checks.rs). Milliseconds since 1970.
ALTER TABLE webhook_deliveries ADD COLUMN failed_at INTEGER NULL;
CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (failed_at) WHERE state = 'failed';
