//! The database's view at the end of a run: every link row and every lease in the ledger,
//! read directly from PostgreSQL (not through any proxy or node).

use anyhow::Context;

/// One row of `links`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkRow {
    /// The code.
    pub code: String,
    /// The stored target URL.
    pub url: String,
    /// `generated`, `alias` or `private`.
    pub kind: String,
    /// The ID a generated code was made from.
    pub id: Option<i64>,
}

/// One row of `id_leases`.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseRow {
    /// The ledger's lease ID.
    pub lease_id: i64,
    /// The namespace.
    pub namespace: String,
    /// First ID of the lease.
    pub start: i64,
    /// One past the last ID.
    pub end: i64,
    /// Who holds it.
    pub holder: String,
    /// When it was granted, in seconds since the Unix epoch.
    pub leased_at: f64,
}

/// Everything the checker reads from the database.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Every link.
    pub links: Vec<LinkRow>,
    /// Every lease, sorted by namespace and start.
    pub leases: Vec<LeaseRow>,
    /// Pairs of leases of one namespace that share an ID, as counted by the database.
    pub overlapping_pairs: i64,
}

impl Snapshot {
    /// Reads the snapshot over `db`.
    pub async fn load(db: &tokio_postgres::Client) -> anyhow::Result<Snapshot> {
        let links = db
            .query("SELECT code, long_url, kind, id FROM links", &[])
            .await
            .context("read links")?
            .iter()
            .map(|r| LinkRow {
                code: r.get(0),
                url: r.get(1),
                kind: r.get(2),
                id: r.get(3),
            })
            .collect();
        let leases = db
            .query(
                "SELECT lease_id, namespace, lower(ids), upper(ids), holder,
                        extract(epoch FROM leased_at)::float8
                   FROM id_leases ORDER BY namespace, lower(ids)",
                &[],
            )
            .await
            .context("read the lease ledger")?
            .iter()
            .map(|r| LeaseRow {
                lease_id: r.get(0),
                namespace: r.get(1),
                start: r.get(2),
                end: r.get(3),
                holder: r.get(4),
                leased_at: r.get(5),
            })
            .collect();
        let overlapping_pairs = db
            .query_one(
                "SELECT count(*) FROM id_leases a JOIN id_leases b
                   ON a.namespace = b.namespace AND a.lease_id < b.lease_id AND a.ids && b.ids",
                &[],
            )
            .await
            .context("count overlapping leases")?
            .get(0);
        Ok(Snapshot {
            links,
            leases,
            overlapping_pairs,
        })
    }
}
