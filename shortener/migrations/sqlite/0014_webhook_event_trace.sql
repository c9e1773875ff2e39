-- A webhook event keeps the W3C traceparent of the traced request that recorded it, so the
-- delivery continues that trace. NULL when the request was not traced.
ALTER TABLE webhook_events ADD COLUMN traceparent TEXT NULL;
