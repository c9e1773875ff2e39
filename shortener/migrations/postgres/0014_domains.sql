-- Branded domains: a host a tenant owns. The host is the primary key, so two tenants racing for
-- one host get one row and one winner, whatever the nodes believed before they wrote. The
-- domain's settings are read by the redirect edge of later releases; unset ones are NULL.
-- Independent of the links table and its layouts.
CREATE TABLE domains (
    host            text COLLATE "C" PRIMARY KEY,
    tenant          text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    created_by      text NOT NULL,
    root_url        text,
    not_found_url   text,
    expired_url     text,
    redirect_status smallint CHECK (redirect_status IN (301, 302, 307, 308)),
    robots          text NOT NULL DEFAULT 'disallow' CHECK (robots IN ('allow', 'disallow'))
);

-- A tenant's domains, in host order (the list's keyset).
CREATE INDEX domains_by_tenant ON domains (tenant, host);
