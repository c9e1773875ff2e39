-- Which of a link's targets each visit went to: a dimension of the per-link rollups, so a split
-- or a rule can be judged. Empty for the link's own URL, which every row written before routing
-- keeps. A WITHOUT ROWID table's key cannot be altered, so both tables are made anew.
CREATE TABLE click_hourly_routes (
    tenant   TEXT NOT NULL,
    code     TEXT NOT NULL,
    bucket   INTEGER NOT NULL,
    referrer TEXT NOT NULL,
    device   TEXT NOT NULL,
    country  TEXT NOT NULL,
    human    INTEGER NOT NULL,
    bot      INTEGER NOT NULL,
    head     INTEGER NOT NULL,
    route    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (code, bucket, referrer, device, country, route)
) STRICT, WITHOUT ROWID;
INSERT INTO click_hourly_routes (tenant, code, bucket, referrer, device, country, human, bot, head)
    SELECT tenant, code, bucket, referrer, device, country, human, bot, head FROM click_hourly;
DROP TABLE click_hourly;
ALTER TABLE click_hourly_routes RENAME TO click_hourly;
CREATE INDEX click_hourly_tenant ON click_hourly (tenant, bucket);
CREATE INDEX click_hourly_bucket ON click_hourly (bucket);

CREATE TABLE click_daily_routes (
    tenant   TEXT NOT NULL,
    code     TEXT NOT NULL,
    bucket   INTEGER NOT NULL,
    referrer TEXT NOT NULL,
    device   TEXT NOT NULL,
    country  TEXT NOT NULL,
    human    INTEGER NOT NULL,
    bot      INTEGER NOT NULL,
    head     INTEGER NOT NULL,
    route    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (code, bucket, referrer, device, country, route)
) STRICT, WITHOUT ROWID;
INSERT INTO click_daily_routes (tenant, code, bucket, referrer, device, country, human, bot, head)
    SELECT tenant, code, bucket, referrer, device, country, human, bot, head FROM click_daily;
DROP TABLE click_daily;
ALTER TABLE click_daily_routes RENAME TO click_daily;
CREATE INDEX click_daily_tenant ON click_daily (tenant, bucket);
CREATE INDEX click_daily_bucket ON click_daily (bucket);
