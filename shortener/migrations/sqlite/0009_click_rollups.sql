-- Click rollups: counts per link, hour (or UTC day, once compacted), referrer host, device
-- class and country, added by the batched flush with additive upserts (no trigger, no per-click
-- row). Buckets are Unix seconds of the hour's or day's start. Clustered by key (WITHOUT
-- ROWID): a flush upserts into one B-tree, and a link's range is one contiguous read.
CREATE TABLE click_hourly (
    tenant   TEXT NOT NULL,
    code     TEXT NOT NULL,
    bucket   INTEGER NOT NULL,
    referrer TEXT NOT NULL,
    device   TEXT NOT NULL,
    country  TEXT NOT NULL,
    human    INTEGER NOT NULL,
    bot      INTEGER NOT NULL,
    head     INTEGER NOT NULL,
    PRIMARY KEY (code, bucket, referrer, device, country)
) STRICT, WITHOUT ROWID;
-- A tenant's summary reads by bucket range; compaction and retention find old rows by bucket.
CREATE INDEX click_hourly_tenant ON click_hourly (tenant, bucket);
CREATE INDEX click_hourly_bucket ON click_hourly (bucket);

CREATE TABLE click_daily (
    tenant   TEXT NOT NULL,
    code     TEXT NOT NULL,
    bucket   INTEGER NOT NULL,
    referrer TEXT NOT NULL,
    device   TEXT NOT NULL,
    country  TEXT NOT NULL,
    human    INTEGER NOT NULL,
    bot      INTEGER NOT NULL,
    head     INTEGER NOT NULL,
    PRIMARY KEY (code, bucket, referrer, device, country)
) STRICT, WITHOUT ROWID;
CREATE INDEX click_daily_tenant ON click_daily (tenant, bucket);
CREATE INDEX click_daily_bucket ON click_daily (bucket);
