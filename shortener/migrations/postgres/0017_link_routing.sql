-- Where a link routes besides its URL (docs/shortener.md, "Redirect rules"): a JSON object of its
-- redirect rules, split variants and app targets; NULL for a plain link, which every link made
-- before routing keeps. One column, read whole with the link and compiled by the redirect edge.
ALTER TABLE links ADD COLUMN routing text NULL;
