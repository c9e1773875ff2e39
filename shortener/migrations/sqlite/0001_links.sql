-- Links. TEXT compares byte-wise (BINARY collation) in SQLite: codes are case-sensitive.
-- Times are UNIX milliseconds.
CREATE TABLE links (
    code        TEXT PRIMARY KEY,
    long_url    TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('generated', 'private', 'alias')),
    id          INTEGER NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NULL,
    deleted_at  INTEGER NULL,
    owner       TEXT NOT NULL,
    dedup_key   BLOB NULL UNIQUE
) STRICT;

CREATE UNIQUE INDEX links_generated_id ON links (id) WHERE id IS NOT NULL;

CREATE TABLE idempotency_keys (
    owner       TEXT NOT NULL,
    key         TEXT NOT NULL,
    fingerprint BLOB NOT NULL,
    code        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (owner, key)
) STRICT;

-- The embedded lease ledger: the same semantics as the id-service's, in the same file.
CREATE TABLE id_namespaces (
    namespace   TEXT PRIMARY KEY,
    next_id     INTEGER NOT NULL CHECK (next_id >= 0)
) STRICT;

CREATE TABLE id_leases (
    lease_id    INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace   TEXT NOT NULL,
    start_id    INTEGER NOT NULL,
    end_id      INTEGER NOT NULL,
    holder      TEXT NOT NULL,
    leased_at   INTEGER NOT NULL,
    CHECK (start_id >= 0 AND start_id < end_id)
) STRICT;

CREATE INDEX id_leases_range ON id_leases (namespace, start_id);

-- The database itself refuses overlapping leases of one namespace.
CREATE TRIGGER id_leases_disjoint BEFORE INSERT ON id_leases
WHEN EXISTS (
    SELECT 1 FROM id_leases
    WHERE namespace = NEW.namespace AND start_id < NEW.end_id AND NEW.start_id < end_id
)
BEGIN
    SELECT RAISE(ABORT, 'lease overlaps an existing lease');
END;
