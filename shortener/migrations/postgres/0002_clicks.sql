-- Click counts, kept apart from links so the redirect path never writes a link row.
-- Nodes add their batched counts with one upsert per flush.
CREATE TABLE link_clicks (
    code   text COLLATE "C" PRIMARY KEY,
    human  bigint NOT NULL DEFAULT 0,
    head   bigint NOT NULL DEFAULT 0,
    bot    bigint NOT NULL DEFAULT 0
);
