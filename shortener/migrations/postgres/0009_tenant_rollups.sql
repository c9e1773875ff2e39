-- Tenant-level rollups, so a tenant's summary costs the same whatever its number of links and
-- clicks. Kept by the same transaction of the batched flush that adds the per-link rows, by
-- compaction and by retention, so they always equal the sums of the per-link rows
-- (docs/analytics.md, "Rollup tables").
--
-- `tenant_hourly` and `tenant_daily` hold one row per (tenant, dimension, bucket, value):
-- dimension `all` (value '') carries the bucket's totals, `referrer`, `device` and `country`
-- one row per referrer host, device class or country seen in the bucket. A summary over a
-- range reads one key range per dimension, (buckets) x (values seen per bucket) rows, not
-- one row per link. Small, so not
-- partitioned: compaction moves a day's rows with INSERT ... SELECT and DELETE, retention
-- deletes the months it drops from `click_daily`.
CREATE TABLE tenant_hourly (
    tenant text NOT NULL,
    bucket bigint NOT NULL,
    dim    text NOT NULL,
    name   text NOT NULL,
    human  bigint NOT NULL,
    bot    bigint NOT NULL,
    head   bigint NOT NULL,
    PRIMARY KEY (tenant, dim, bucket, name)
);
-- Compaction and retention find a day's or month's rows of every tenant.
CREATE INDEX tenant_hourly_bucket ON tenant_hourly (bucket);

CREATE TABLE tenant_daily (
    tenant text NOT NULL,
    bucket bigint NOT NULL,
    dim    text NOT NULL,
    name   text NOT NULL,
    human  bigint NOT NULL,
    bot    bigint NOT NULL,
    head   bigint NOT NULL,
    PRIMARY KEY (tenant, dim, bucket, name)
);
CREATE INDEX tenant_daily_bucket ON tenant_daily (bucket);

-- Visits per link and UTC day, for the top links of a summary: each day's busiest links are
-- the first rows of the day in `link_day_totals_top`. Compaction leaves it alone (a day's
-- total does not change when its hours are folded); retention drops the same months as from
-- `click_daily`. Partitioned by month (`link_day_totals_mYYYYMM`), made with the day's
-- hourly partition.
CREATE TABLE link_day_totals (
    tenant text NOT NULL,
    day    bigint NOT NULL,
    code   text COLLATE "C" NOT NULL,
    visits bigint NOT NULL,
    PRIMARY KEY (tenant, day, code)
) PARTITION BY RANGE (day);
CREATE INDEX link_day_totals_top ON link_day_totals (tenant, day, visits DESC, code);

-- The rollups already written.
DO $$
DECLARE
    month timestamp;
BEGIN
    FOR month IN
        SELECT DISTINCT date_trunc('month', to_timestamp(bucket) AT TIME ZONE 'UTC')
        FROM (SELECT bucket FROM click_hourly UNION SELECT bucket FROM click_daily) AS b
    LOOP
        EXECUTE format(
            'CREATE TABLE IF NOT EXISTS %I PARTITION OF link_day_totals FOR VALUES FROM (%s) TO (%s)',
            'link_day_totals_m' || to_char(month, 'YYYYMM'),
            extract(epoch FROM month)::bigint,
            extract(epoch FROM month + interval '1 month')::bigint);
    END LOOP;
END $$;

INSERT INTO link_day_totals (tenant, day, code, visits)
SELECT min(tenant), bucket - bucket % 86400, code, sum(human + bot + head)
FROM (SELECT tenant, code, bucket, human, bot, head FROM click_hourly
      UNION ALL SELECT tenant, code, bucket, human, bot, head FROM click_daily) AS r
GROUP BY code, bucket - bucket % 86400;

INSERT INTO tenant_hourly (tenant, bucket, dim, name, human, bot, head)
SELECT tenant, bucket, dim, name, sum(human), sum(bot), sum(head)
FROM (SELECT tenant, bucket, 'all' AS dim, '' AS name, human, bot, head FROM click_hourly
      UNION ALL SELECT tenant, bucket, 'referrer', referrer, human, bot, head FROM click_hourly
      UNION ALL SELECT tenant, bucket, 'device', device, human, bot, head FROM click_hourly
      UNION ALL SELECT tenant, bucket, 'country', country, human, bot, head FROM click_hourly) AS r
GROUP BY tenant, bucket, dim, name;

INSERT INTO tenant_daily (tenant, bucket, dim, name, human, bot, head)
SELECT tenant, bucket, dim, name, sum(human), sum(bot), sum(head)
FROM (SELECT tenant, bucket, 'all' AS dim, '' AS name, human, bot, head FROM click_daily
      UNION ALL SELECT tenant, bucket, 'referrer', referrer, human, bot, head FROM click_daily
      UNION ALL SELECT tenant, bucket, 'device', device, human, bot, head FROM click_daily
      UNION ALL SELECT tenant, bucket, 'country', country, human, bot, head FROM click_daily) AS r
GROUP BY tenant, bucket, dim, name;
