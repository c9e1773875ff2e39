-- The named rows (no ID: negative slots) whose code is base62, by length: among them, those of
-- the base length up to 11 characters are codes of generated shape that decode to no ID
-- (imported legacy codes; an alias of that shape is refused). Whether any exists is read with
-- the slot high-water mark, from this index alone, and while none does a redirect refuses a
-- code of that shape that does not decode without a lookup (docs/design.md, I9). A generated
-- row (a positive slot) never enters the index. `IF NOT EXISTS`: an operator may build it
-- beforehand, concurrently (docs/operations.md); what a failed or cancelled concurrent build
-- left behind (an index marked invalid) is dropped first and built again.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index WHERE indexrelid = to_regclass('links_named_base62')
               AND NOT indisvalid) THEN
        DROP INDEX links_named_base62;
    END IF;
END $$;
CREATE INDEX IF NOT EXISTS links_named_base62 ON links ((length(code))) WHERE slot < 0 AND code ~ '^[0-9A-Za-z]+$';
