-- What the named rows (codes without an ID) whose code decodes under the file's code space add
-- to the high-water mark of slots (docs/design.md, I9): the highest ID such a code decodes to
-- (`high`, -1 for none), over the named rows down to slot `lowest`. Named slots only go down
-- (each new one is one below the lowest), so the rows added since are those below `lowest`,
-- and each start reads only them. The row is written at start, never by a create: the node
-- keeps the mark in memory while it runs, raised by every write before it commits.
CREATE TABLE named_high_water (
    only   INTEGER PRIMARY KEY CHECK (only = 1),
    lowest INTEGER NOT NULL CHECK (lowest <= 0),
    high   INTEGER NOT NULL
) STRICT;
