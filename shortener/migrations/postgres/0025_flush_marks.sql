-- Where each writer of click totals and rollups (one flush of one node process) is in its
-- sequence of batches. Counts are added, so a batch written twice would count its visits twice;
-- a write whose commit may or may not have happened (the connection lost during it) is sent
-- again with the same mark, and a batch is added only if its mark is past the writer's last one,
-- advanced in the batch's own transaction. One row per writer; rows of writers gone for a week
-- are removed by the rollup maintenance.
CREATE TABLE flush_marks (
    writer bigint NOT NULL,
    stream text NOT NULL CHECK (stream IN ('clicks', 'rollups')),
    seq bigint NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (writer, stream)
);
