-- Target domains blocked through the admin API (besides the blocklist file): `example.com`
-- for that domain, `.example.com` for it and its subdomains. Every node re-reads the table.
CREATE TABLE blocked_domains (
    entry    text COLLATE "C" PRIMARY KEY,
    added_at timestamptz NOT NULL DEFAULT now(),
    added_by text NOT NULL
);
