-- Branded domains: a host a tenant owns. The host is the primary key, so two claims of one
-- host get one row and one winner. Unset settings are NULL. Times are UNIX milliseconds.
CREATE TABLE domains (
    host            TEXT PRIMARY KEY,
    tenant          TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    created_by      TEXT NOT NULL,
    root_url        TEXT,
    not_found_url   TEXT,
    expired_url     TEXT,
    redirect_status INTEGER CHECK (redirect_status IN (301, 302, 307, 308)),
    robots          TEXT NOT NULL DEFAULT 'disallow' CHECK (robots IN ('allow', 'disallow'))
) STRICT;

-- A tenant's domains, in host order (the list's keyset).
CREATE INDEX domains_by_tenant ON domains (tenant, host);
