-- Which of a link's targets each visit went to (docs/analytics.md, "Routes"): a dimension of the
-- per-link rollups, so a split or a rule can be judged. Empty for the link's own URL, which
-- every row written before routing keeps. The default is a constant, so adding the column
-- rewrites no partition; the primary key is made anew on every partition.
ALTER TABLE click_hourly ADD COLUMN route text NOT NULL DEFAULT '';
ALTER TABLE click_hourly DROP CONSTRAINT click_hourly_pkey;
ALTER TABLE click_hourly ADD PRIMARY KEY (code, bucket, referrer, device, country, route);

ALTER TABLE click_daily ADD COLUMN route text NOT NULL DEFAULT '';
ALTER TABLE click_daily DROP CONSTRAINT click_daily_pkey;
ALTER TABLE click_daily ADD PRIMARY KEY (code, bucket, referrer, device, country, route);
