-- What the last `clicks.rollup` event of each tenant and hour told (see the PostgreSQL
-- migration of the same name): late clicks are told again as the hour's next revision.
CREATE TABLE rollup_told (
    hour     INTEGER NOT NULL,
    tenant   TEXT NOT NULL,
    revision INTEGER NOT NULL,
    human    INTEGER NOT NULL,
    bot      INTEGER NOT NULL,
    head     INTEGER NOT NULL,
    PRIMARY KEY (hour, tenant)
) STRICT, WITHOUT ROWID;

INSERT INTO rollup_told (hour, tenant, revision, human, bot, head)
SELECT unixepoch(data ->> '$.hour'), tenant, 0, data ->> '$.human', data ->> '$.bot', data ->> '$.head'
FROM webhook_events WHERE kind = 'clicks.rollup'
ON CONFLICT (hour, tenant) DO NOTHING;
