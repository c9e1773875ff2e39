-- Generated links keyed by their ID (docs/design.md, "Where a link's row is found").
--
-- `slot` is the ID a code decodes to under the database's code space (for a generated link,
-- its own ID), or a negative number from `links_named_slot` for a code that decodes to none
-- (most aliases, private codes, legacy codes). Every writer fills it from now on; rows written
-- before this migration get it from `shortener layout migrate`, which then moves the primary
-- key from `code` to `slot` online. A database with no links yet gets that layout right here.
ALTER TABLE links ADD COLUMN slot bigint NULL;
CREATE SEQUENCE links_named_slot;

-- The code space (key fingerprint and base length) the slots were computed in; a node under
-- another one would look for rows where they are not, so it is refused at start.
CREATE TABLE code_space (
    single      boolean PRIMARY KEY DEFAULT true CHECK (single),
    fingerprint text NOT NULL,
    length      integer NOT NULL
);

-- Which key the links table is found by ('code': the code primary key; 'slot': the slot
-- primary key and the named-code index), and the layout migration's progress.
CREATE TABLE link_layout (
    single       boolean PRIMARY KEY DEFAULT true CHECK (single),
    layout       text NOT NULL CHECK (layout IN ('code', 'slot')),
    step         text NULL,
    resume_after text COLLATE "C" NULL,
    filled       bigint NOT NULL DEFAULT 0,
    before_rows  bigint NULL,
    before_sum   numeric NULL,
    after_rows   bigint NULL,
    after_sum    numeric NULL,
    started_at   timestamptz NULL,
    finished_at  timestamptz NULL
);

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM links) THEN
        INSERT INTO link_layout (layout) VALUES ('code');
    ELSE
        ALTER TABLE links ALTER COLUMN slot SET NOT NULL;
        ALTER TABLE links DROP CONSTRAINT links_pkey;
        ALTER TABLE links ADD CONSTRAINT links_pkey PRIMARY KEY (slot);
        CREATE UNIQUE INDEX links_named_code ON links (code) WHERE slot < 0;
        ALTER TABLE links DROP CONSTRAINT links_dedup_key_key;
        CREATE UNIQUE INDEX links_dedup ON links (dedup_key) WHERE dedup_key IS NOT NULL;
        INSERT INTO link_layout (layout, finished_at) VALUES ('slot', now());
    END IF;
END
$$;
