-- Where a link routes besides its URL: a JSON object of its redirect rules, split variants and
-- app targets; NULL for a plain link.
ALTER TABLE links ADD COLUMN routing TEXT NULL;
