-- Whether a named row holds a code of generated shape (base62, of the base length up to 11
-- characters) that decodes to no ID: an imported legacy code, found only by its text. While
-- none does, a redirect refuses a code of that shape that does not decode without a lookup
-- (docs/design.md, I9). Kept with the named rows' high-water mark and brought up to date the
-- same way, down to a lowest named slot of its own (`undecodable_lowest`): a release without
-- this column moves `lowest` past the rows it adds without looking at them for this, so the
-- next start looks again from the higher of the two. 0 here: the next start looks at every
-- named row once.
ALTER TABLE named_high_water ADD COLUMN undecodable INTEGER NOT NULL DEFAULT 0
    CHECK (undecodable IN (0, 1));
ALTER TABLE named_high_water ADD COLUMN undecodable_lowest INTEGER NOT NULL DEFAULT 0
    CHECK (undecodable_lowest <= 0);
