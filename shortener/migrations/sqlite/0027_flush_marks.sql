-- Where each writer of click totals and rollups (one flush of one node process) is in its
-- sequence of batches: a batch sent again after a failed write is added only if its mark is
-- past the writer's last one, advanced in the batch's own transaction (see the PostgreSQL
-- migration of the same name). Milliseconds since 1970 in `at`; rows of writers gone for a
-- week are removed by the rollup maintenance.
CREATE TABLE flush_marks (
    writer INTEGER NOT NULL,
    stream TEXT NOT NULL CHECK (stream IN ('clicks', 'rollups')),
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (writer, stream)
) WITHOUT ROWID;
