-- Redirect rules of a link: an ordered JSON array of targets with their conditions; NULL for a
-- plain link.
ALTER TABLE links ADD COLUMN rules TEXT NULL;
