-- Tenant-level rollups, so a tenant's summary costs the same whatever its number of links and
-- clicks; kept by the flush's transaction, compaction and retention together with the
-- per-link rows, whose sums they always equal (docs/analytics.md, "Rollup tables").
-- `dim` is `all` (name '': the bucket's totals), `referrer`, `device` or `country`.
CREATE TABLE tenant_hourly (
    tenant TEXT NOT NULL,
    bucket INTEGER NOT NULL,
    dim    TEXT NOT NULL,
    name   TEXT NOT NULL,
    human  INTEGER NOT NULL,
    bot    INTEGER NOT NULL,
    head   INTEGER NOT NULL,
    PRIMARY KEY (tenant, dim, bucket, name)
) STRICT, WITHOUT ROWID;
CREATE INDEX tenant_hourly_bucket ON tenant_hourly (bucket);

CREATE TABLE tenant_daily (
    tenant TEXT NOT NULL,
    bucket INTEGER NOT NULL,
    dim    TEXT NOT NULL,
    name   TEXT NOT NULL,
    human  INTEGER NOT NULL,
    bot    INTEGER NOT NULL,
    head   INTEGER NOT NULL,
    PRIMARY KEY (tenant, dim, bucket, name)
) STRICT, WITHOUT ROWID;
CREATE INDEX tenant_daily_bucket ON tenant_daily (bucket);

-- Visits per link and UTC day, for the top links of a summary.
CREATE TABLE link_day_totals (
    tenant TEXT NOT NULL,
    day    INTEGER NOT NULL,
    code   TEXT NOT NULL,
    visits INTEGER NOT NULL,
    PRIMARY KEY (tenant, day, code)
) STRICT, WITHOUT ROWID;
CREATE INDEX link_day_totals_top ON link_day_totals (tenant, day, visits DESC, code);

-- The rollups already written.
INSERT INTO link_day_totals (tenant, day, code, visits)
SELECT min(tenant), bucket - bucket % 86400, code, sum(human + bot + head)
FROM (SELECT tenant, code, bucket, human, bot, head FROM click_hourly
      UNION ALL SELECT tenant, code, bucket, human, bot, head FROM click_daily)
GROUP BY code, bucket - bucket % 86400;

INSERT INTO tenant_hourly (tenant, bucket, dim, name, human, bot, head)
SELECT tenant, bucket, dim, name, sum(human), sum(bot), sum(head)
FROM (SELECT tenant, bucket, 'all' AS dim, '' AS name, human, bot, head FROM click_hourly
      UNION ALL SELECT tenant, bucket, 'referrer', referrer, human, bot, head FROM click_hourly
      UNION ALL SELECT tenant, bucket, 'device', device, human, bot, head FROM click_hourly
      UNION ALL SELECT tenant, bucket, 'country', country, human, bot, head FROM click_hourly)
GROUP BY tenant, bucket, dim, name;

INSERT INTO tenant_daily (tenant, bucket, dim, name, human, bot, head)
SELECT tenant, bucket, dim, name, sum(human), sum(bot), sum(head)
FROM (SELECT tenant, bucket, 'all' AS dim, '' AS name, human, bot, head FROM click_daily
      UNION ALL SELECT tenant, bucket, 'referrer', referrer, human, bot, head FROM click_daily
      UNION ALL SELECT tenant, bucket, 'device', device, human, bot, head FROM click_daily
      UNION ALL SELECT tenant, bucket, 'country', country, human, bot, head FROM click_daily)
GROUP BY tenant, bucket, dim, name;
