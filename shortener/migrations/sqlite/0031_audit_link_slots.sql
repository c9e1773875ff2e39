-- A link's audit entries are found by the ID its code decodes to (`object_slot`), not by the
-- code's text: codes are random, so every create put its entry at a random place in the index
-- by object, dirtying a page of it anywhere in the file; IDs grow, so the entry of a new link
-- now goes at the index's end. Entries of objects whose ID does not decode (aliases, hosts,
-- keys...) and those written before this migration keep the index by object text.
ALTER TABLE audit_log ADD COLUMN object_slot INTEGER NULL;
DROP INDEX audit_log_object;
CREATE INDEX audit_log_object ON audit_log (object_id, id) WHERE object_slot IS NULL;
CREATE INDEX audit_log_slot ON audit_log (object_slot, id) WHERE object_slot IS NOT NULL;
