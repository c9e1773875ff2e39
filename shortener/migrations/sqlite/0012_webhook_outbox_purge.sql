-- The outbox is purged: deliveries delivered longer ago than the log's retention, then events
-- no delivery refers to any more. Both need an index to find them without a scan.
CREATE INDEX webhook_deliveries_delivered ON webhook_deliveries (delivered_at) WHERE state = 'delivered';
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);
