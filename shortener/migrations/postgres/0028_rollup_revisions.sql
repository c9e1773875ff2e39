-- What the last `clicks.rollup` event of each tenant and hour told: its revision and totals.
-- Clicks that reach an hour after its event (a node whose flush waited out an outage, a batch
-- in doubt applied later) are then told again as the hour's next revision, instead of never.
-- A row is written with the event it describes, so an event the outbox bound dropped is asked
-- for again by a later run. Rows older than the hours the events look back over are removed.
CREATE TABLE rollup_told (
    hour     bigint NOT NULL,
    tenant   text NOT NULL,
    revision integer NOT NULL,
    human    bigint NOT NULL,
    bot      bigint NOT NULL,
    head     bigint NOT NULL,
    PRIMARY KEY (hour, tenant)
);

-- The events told before this table are each hour's revision 0.
INSERT INTO rollup_told (hour, tenant, revision, human, bot, head)
SELECT DISTINCT ON (hour, tenant) hour, tenant, 0, human, bot, head
FROM (SELECT extract(epoch FROM (data::jsonb ->> 'hour')::timestamptz)::bigint AS hour, tenant,
             (data::jsonb ->> 'human')::bigint AS human, (data::jsonb ->> 'bot')::bigint AS bot,
             (data::jsonb ->> 'head')::bigint AS head, id
      FROM webhook_events WHERE kind = 'clicks.rollup') AS told
ORDER BY hour, tenant, id DESC;
