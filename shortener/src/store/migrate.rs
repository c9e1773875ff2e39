//! Versioned schema migrations for both backends, applied at start-up or by `shortener migrate`.
//!
//! Each backend has an ordered list of SQL files; a version table records which ran. On
//! PostgreSQL the whole run holds a transaction-scoped advisory lock, so several nodes starting
//! at once apply each migration exactly once; SQLite serialises writers by itself.

/// One migration: a version number and its SQL.
pub(crate) struct Migration {
    pub(crate) version: i64,
    pub(crate) name: &'static str,
    pub(crate) sql: &'static str,
}

/// The PostgreSQL migrations, in order.
pub(crate) const POSTGRES: &[Migration] = &[
    Migration {
        version: 1,
        name: "links",
        sql: include_str!("../../migrations/postgres/0001_links.sql"),
    },
    Migration {
        version: 2,
        name: "clicks",
        sql: include_str!("../../migrations/postgres/0002_clicks.sql"),
    },
    Migration {
        version: 3,
        name: "tenants",
        sql: include_str!("../../migrations/postgres/0003_tenants.sql"),
    },
    Migration {
        version: 4,
        name: "link management",
        sql: include_str!("../../migrations/postgres/0004_link_management.sql"),
    },
    Migration {
        version: 5,
        name: "link passwords",
        sql: include_str!("../../migrations/postgres/0005_link_passwords.sql"),
    },
    Migration {
        version: 6,
        name: "blocked domains",
        sql: include_str!("../../migrations/postgres/0006_blocked_domains.sql"),
    },
    Migration {
        version: 7,
        name: "click rollups",
        sql: include_str!("../../migrations/postgres/0007_click_rollups.sql"),
    },
    Migration {
        version: 8,
        name: "webhooks",
        sql: include_str!("../../migrations/postgres/0008_webhooks.sql"),
    },
    Migration {
        version: 9,
        name: "tenant rollups",
        sql: include_str!("../../migrations/postgres/0009_tenant_rollups.sql"),
    },
    Migration {
        version: 10,
        name: "webhook outbox purge",
        sql: include_str!("../../migrations/postgres/0010_webhook_outbox_purge.sql"),
    },
    Migration {
        version: 11,
        name: "slot layout",
        sql: include_str!("../../migrations/postgres/0011_slot_layout.sql"),
    },
    Migration {
        version: 12,
        name: "webhook fair delivery",
        sql: include_str!("../../migrations/postgres/0012_webhook_fair_delivery.sql"),
    },
    Migration {
        version: 13,
        name: "webhook event trace",
        sql: include_str!("../../migrations/postgres/0013_webhook_event_trace.sql"),
    },
    Migration {
        version: 14,
        name: "domains",
        sql: include_str!("../../migrations/postgres/0014_domains.sql"),
    },
    Migration {
        version: 15,
        name: "domain app files",
        sql: include_str!("../../migrations/postgres/0015_domain_app_files.sql"),
    },
    Migration {
        version: 16,
        name: "link domains",
        sql: include_str!("../../migrations/postgres/0016_link_domains.sql"),
    },
    Migration {
        version: 17,
        name: "link routing",
        sql: include_str!("../../migrations/postgres/0017_link_routing.sql"),
    },
    Migration {
        version: 18,
        name: "click routes",
        sql: include_str!("../../migrations/postgres/0018_click_routes.sql"),
    },
    Migration {
        version: 19,
        name: "api keys",
        sql: include_str!("../../migrations/postgres/0019_api_keys.sql"),
    },
    Migration {
        version: 20,
        name: "audit log",
        sql: include_str!("../../migrations/postgres/0020_audit_log.sql"),
    },
    Migration {
        version: 21,
        name: "console sessions",
        sql: include_str!("../../migrations/postgres/0021_console_sessions.sql"),
    },
    Migration {
        version: 22,
        name: "console sessions by sign-out",
        sql: include_str!("../../migrations/postgres/0022_console_sessions_revoked.sql"),
    },
    Migration {
        version: 23,
        name: "search index pending list drained by the nodes",
        sql: include_str!("../../migrations/postgres/0023_search_index_pending_list.sql"),
    },
    Migration {
        version: 24,
        name: "webhook endpoint backoff",
        sql: include_str!("../../migrations/postgres/0024_webhook_endpoint_backoff.sql"),
    },
    Migration {
        version: 25,
        name: "flush marks",
        sql: include_str!("../../migrations/postgres/0025_flush_marks.sql"),
    },
    Migration {
        version: 26,
        name: "webhook deliveries that fail for good",
        sql: include_str!("../../migrations/postgres/0026_webhook_delivery_failed.sql"),
    },
    Migration {
        version: 27,
        name: "keys capped by their person's role",
        sql: include_str!("../../migrations/postgres/0027_person_keys.sql"),
    },
    Migration {
        version: 28,
        name: "rollup events told again when late clicks change them",
        sql: include_str!("../../migrations/postgres/0028_rollup_revisions.sql"),
    },
    Migration {
        version: 29,
        name: "named codes of generated shape that decode to no ID, found by length",
        sql: include_str!("../../migrations/postgres/0029_undecodable_named_codes.sql"),
    },
];

/// The SQLite migrations, in order.
pub(crate) const SQLITE: &[Migration] = &[
    Migration {
        version: 1,
        name: "links",
        sql: include_str!("../../migrations/sqlite/0001_links.sql"),
    },
    Migration {
        version: 2,
        name: "clicks",
        sql: include_str!("../../migrations/sqlite/0002_clicks.sql"),
    },
    Migration {
        version: 3,
        name: "clicks by code",
        sql: include_str!("../../migrations/sqlite/0003_clicks_by_code.sql"),
    },
    Migration {
        version: 4,
        name: "links by id",
        sql: include_str!("../../migrations/sqlite/0004_links_by_id.sql"),
    },
    Migration {
        version: 5,
        name: "tenants",
        sql: include_str!("../../migrations/sqlite/0005_tenants.sql"),
    },
    Migration {
        version: 6,
        name: "link management",
        sql: include_str!("../../migrations/sqlite/0006_link_management.sql"),
    },
    Migration {
        version: 7,
        name: "link passwords",
        sql: include_str!("../../migrations/sqlite/0007_link_passwords.sql"),
    },
    Migration {
        version: 8,
        name: "blocked domains",
        sql: include_str!("../../migrations/sqlite/0008_blocked_domains.sql"),
    },
    Migration {
        version: 9,
        name: "click rollups",
        sql: include_str!("../../migrations/sqlite/0009_click_rollups.sql"),
    },
    Migration {
        version: 10,
        name: "webhooks",
        sql: include_str!("../../migrations/sqlite/0010_webhooks.sql"),
    },
    Migration {
        version: 11,
        name: "tenant rollups",
        sql: include_str!("../../migrations/sqlite/0011_tenant_rollups.sql"),
    },
    Migration {
        version: 12,
        name: "webhook outbox purge",
        sql: include_str!("../../migrations/sqlite/0012_webhook_outbox_purge.sql"),
    },
    Migration {
        version: 13,
        name: "webhook fair delivery",
        sql: include_str!("../../migrations/sqlite/0013_webhook_fair_delivery.sql"),
    },
    Migration {
        version: 14,
        name: "webhook event trace",
        sql: include_str!("../../migrations/sqlite/0014_webhook_event_trace.sql"),
    },
    Migration {
        version: 15,
        name: "named high water",
        sql: include_str!("../../migrations/sqlite/0015_named_high_water.sql"),
    },
    Migration {
        version: 16,
        name: "domains",
        sql: include_str!("../../migrations/sqlite/0016_domains.sql"),
    },
    Migration {
        version: 17,
        name: "domain app files",
        sql: include_str!("../../migrations/sqlite/0017_domain_app_files.sql"),
    },
    Migration {
        version: 18,
        name: "link domains",
        sql: include_str!("../../migrations/sqlite/0018_link_domains.sql"),
    },
    Migration {
        version: 19,
        name: "link routing",
        sql: include_str!("../../migrations/sqlite/0019_link_routing.sql"),
    },
    Migration {
        version: 20,
        name: "click routes",
        sql: include_str!("../../migrations/sqlite/0020_click_routes.sql"),
    },
    Migration {
        version: 21,
        name: "api keys",
        sql: include_str!("../../migrations/sqlite/0021_api_keys.sql"),
    },
    Migration {
        version: 22,
        name: "audit log",
        sql: include_str!("../../migrations/sqlite/0022_audit_log.sql"),
    },
    Migration {
        version: 23,
        name: "console sessions",
        sql: include_str!("../../migrations/sqlite/0023_console_sessions.sql"),
    },
    Migration {
        version: 24,
        name: "console sessions by sign-out",
        sql: include_str!("../../migrations/sqlite/0024_console_sessions_revoked.sql"),
    },
    Migration {
        version: 25,
        name: "checks as comparisons",
        sql: include_str!("../../migrations/sqlite/0025_checks_as_comparisons.sql"),
    },
    Migration {
        version: 26,
        name: "webhook endpoint backoff",
        sql: include_str!("../../migrations/sqlite/0026_webhook_endpoint_backoff.sql"),
    },
    Migration {
        version: 27,
        name: "flush marks",
        sql: include_str!("../../migrations/sqlite/0027_flush_marks.sql"),
    },
    Migration {
        version: 28,
        name: "webhook deliveries that fail for good",
        sql: include_str!("../../migrations/sqlite/0028_webhook_delivery_failed.sql"),
    },
    Migration {
        version: 29,
        name: "keys capped by their person's role",
        sql: include_str!("../../migrations/sqlite/0029_person_keys.sql"),
    },
    Migration {
        version: 30,
        name: "rollup events told again when late clicks change them",
        sql: include_str!("../../migrations/sqlite/0030_rollup_revisions.sql"),
    },
    Migration {
        version: 31,
        name: "a link's audit entries by the ID its code decodes to",
        sql: include_str!("../../migrations/sqlite/0031_audit_link_slots.sql"),
    },
    Migration {
        version: 32,
        name: "whether a named code of generated shape decodes to no ID",
        sql: include_str!("../../migrations/sqlite/0032_undecodable_named_codes.sql"),
    },
];

/// How many embedded migrations come after `version` (what a file at that version runs).
pub fn sqlite_migrations_after(version: i64) -> usize {
    SQLITE.iter().filter(|m| m.version > version).count()
}

/// The advisory lock key that serialises migrations (`"shortnr"` as an integer).
pub(crate) const ADVISORY_LOCK: i64 = 0x73686f72746e72;

/// The version table, named apart from other services that may share the database.
pub(crate) const VERSION_TABLE: &str = "shortener_schema_migrations";
