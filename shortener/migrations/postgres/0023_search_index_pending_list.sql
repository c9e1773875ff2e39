-- The trigram index on target URLs (list search) takes each insert into its pending list, and
-- the insert that finds the list over its limit merges it into the index inline: ~30 ms
-- inside one create batch at the default 4 MB, the p99 of creates under load. The nodes now
-- merge it every second in the background (`gin_clean_pending_list`); the higher limit keeps
-- the inline merge for when they fall behind (64 MB, in kB).
ALTER INDEX links_url_trgm SET (gin_pending_list_limit = 65536);
