-- Redirect rules of a link (docs/shortener.md, "Redirect rules"): an ordered JSON array of
-- targets with the conditions a visit must meet for each; NULL for a plain link, which every
-- link made before rules keeps.
ALTER TABLE links ADD COLUMN rules text NULL;
