-- An endpoint whose delivery failed waits out a backoff before its next attempt, whichever
-- delivery that is: a receiver that is down for a moment gets one attempt per backoff (which
-- doubles with its failures in a row) rather than a burst of its queued deliveries, each a
-- failure counted towards disabling it. Kept apart from the claim's lease (`leased_until`,
-- which keeps two workers from delivering to one endpoint), so enabling an endpoint by hand
-- can end the wait without touching a lease. Milliseconds since 1970, as `leased_until`.
ALTER TABLE webhook_endpoints ADD COLUMN held_until INTEGER NULL;
