-- Click rollups: counts per link, hour (or UTC day, once compacted), referrer host, device
-- class and country, added by each node's batched flush with additive upserts (no trigger, no
-- per-click row). Buckets are Unix seconds of the hour's or day's start.
--
-- Both tables are partitioned by time, so that old data leaves by dropping partitions rather
-- than deleting rows: `click_hourly` by day (compaction folds a whole day into `click_daily`
-- and drops its partition), `click_daily` by month (retention drops whole months). Partitions
-- are created ahead by the maintenance task, and by a flush for any day it finds missing.
CREATE TABLE click_hourly (
    tenant   text NOT NULL,
    code     text COLLATE "C" NOT NULL,
    bucket   bigint NOT NULL,
    referrer text NOT NULL,
    device   text NOT NULL,
    country  text NOT NULL,
    human    bigint NOT NULL,
    bot      bigint NOT NULL,
    head     bigint NOT NULL,
    PRIMARY KEY (code, bucket, referrer, device, country)
) PARTITION BY RANGE (bucket);
-- A tenant's (or tag's) summary reads its rows by bucket range.
CREATE INDEX click_hourly_tenant ON click_hourly (tenant, bucket);

CREATE TABLE click_daily (
    tenant   text NOT NULL,
    code     text COLLATE "C" NOT NULL,
    bucket   bigint NOT NULL,
    referrer text NOT NULL,
    device   text NOT NULL,
    country  text NOT NULL,
    human    bigint NOT NULL,
    bot      bigint NOT NULL,
    head     bigint NOT NULL,
    PRIMARY KEY (code, bucket, referrer, device, country)
) PARTITION BY RANGE (bucket);
CREATE INDEX click_daily_tenant ON click_daily (tenant, bucket);
