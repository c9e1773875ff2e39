//! Namespaces in the ledger: creation, descriptions and listings.

use super::{Ledger, bigint, db_error, sql};
use crate::domain::{CreateNamespace, ListNamespaces, Namespace, NamespaceInfo};
use crate::error::Error;
use chrono::{DateTime, Utc};
use deadpool_postgres::Object;
use pgtls::pooler::PoolMode;
use tokio_postgres::Row;
use tokio_postgres::types::Type;

/// Every column [`info_from_row`] reads: the namespace, its cursor, and the first lease of the
/// last hour (one index probe of `id_leases_namespace_leased_at`, however busy the namespace).
const INFO_QUERY: &str = "
    SELECT n.name, n.first_id, n.max_id, n.max_block, pg_sequence_last_value(n.seq),
           n.ids_granted, n.created_at, now(), coalesce(n.pg_timeline, 0), n.timeline_jumps,
           n.last_jump_at, w.first_in_window
      FROM id_namespaces n
      LEFT JOIN LATERAL (
            SELECT lower(l.ids) AS first_in_window FROM id_leases l
             WHERE l.namespace = n.name AND l.leased_at >= now() - interval '1 hour'
             ORDER BY l.leased_at LIMIT 1) w ON true";

/// The window of the grant rate.
const RATE_WINDOW_SECONDS: f64 = 3600.0;

impl Ledger {
    /// Creates `namespace` with the server's defaults unless it exists; returns whether it did.
    pub async fn ensure_namespace(&self, namespace: &Namespace) -> Result<bool, Error> {
        // Traced when the call is (see the `otel` crate): never the arguments.
        let span = otel::db_procedure_span("postgresql", "id_ensure_namespace");
        tracing::Instrument::instrument(self.ensure_namespace_untraced(namespace), span).await
    }

    async fn ensure_namespace_untraced(&self, namespace: &Namespace) -> Result<bool, Error> {
        let client = self.client().await?;
        self.create_default(&client, namespace).await
    }

    pub(super) async fn create_default(
        &self,
        client: &Object,
        namespace: &Namespace,
    ) -> Result<bool, Error> {
        create_with(
            client,
            self.settings.pool_mode,
            namespace,
            1,
            self.settings.namespace_max,
            None,
        )
        .await
    }

    /// Creates a namespace as asked; `ALREADY_EXISTS` if the name is taken.
    pub async fn create_namespace(
        &self,
        request: &CreateNamespace,
    ) -> Result<NamespaceInfo, Error> {
        // Traced when the call is (see the `otel` crate): never the arguments.
        let span = otel::db_procedure_span("postgresql", "id_create_namespace");
        tracing::Instrument::instrument(self.create_namespace_untraced(request), span).await
    }

    async fn create_namespace_untraced(
        &self,
        request: &CreateNamespace,
    ) -> Result<NamespaceInfo, Error> {
        let client = self.client().await?;
        let created = create_with(
            &client,
            self.settings.pool_mode,
            &request.namespace,
            request.first_id,
            request.max_id,
            request.max_block,
        )
        .await?;
        if !created {
            return Err(Error::AlreadyExists(format!(
                "namespace {} exists",
                request.namespace
            )));
        }
        self.describe_with(&client, &request.namespace).await
    }

    /// The description of one namespace.
    pub async fn describe_namespace(&self, namespace: &Namespace) -> Result<NamespaceInfo, Error> {
        // Traced when the call is (see the `otel` crate): never the arguments.
        let span = otel::db_span("postgresql", "SELECT", "id_namespaces");
        tracing::Instrument::instrument(self.describe_namespace_untraced(namespace), span).await
    }

    async fn describe_namespace_untraced(
        &self,
        namespace: &Namespace,
    ) -> Result<NamespaceInfo, Error> {
        let client = self.client().await?;
        self.describe_with(&client, namespace).await
    }

    async fn describe_with(
        &self,
        client: &Object,
        namespace: &Namespace,
    ) -> Result<NamespaceInfo, Error> {
        let row = sql::query_opt(
            client,
            self.settings.pool_mode,
            &format!("{INFO_QUERY} WHERE n.name = $1"),
            &[(&namespace.as_str(), Type::TEXT)],
        )
        .await
        .map_err(|e| db_error(e, namespace))?
        .ok_or_else(|| Error::NotFound(format!("namespace {namespace} does not exist")))?;
        self.info_from_row(&row)
    }

    /// A page of namespaces in name order; only those in `visible` unless it is `None`.
    pub async fn list_namespaces(
        &self,
        request: &ListNamespaces,
        visible: Option<Vec<String>>,
    ) -> Result<Vec<NamespaceInfo>, Error> {
        // Traced when the call is (see the `otel` crate): never the arguments.
        let span = otel::db_span("postgresql", "SELECT", "id_namespaces");
        tracing::Instrument::instrument(self.list_namespaces_untraced(request, visible), span).await
    }

    async fn list_namespaces_untraced(
        &self,
        request: &ListNamespaces,
        visible: Option<Vec<String>>,
    ) -> Result<Vec<NamespaceInfo>, Error> {
        let client = self.client().await?;
        let after = request.after.as_ref().map(Namespace::as_str);
        let rows = sql::query(
            &client,
            self.settings.pool_mode,
            &format!(
                "{INFO_QUERY}
                  WHERE ($1::text IS NULL OR n.name > $1)
                    AND ($2::text[] IS NULL OR n.name = ANY($2))
                  ORDER BY n.name LIMIT $3"
            ),
            &[
                (&after, Type::TEXT),
                (&visible, Type::TEXT_ARRAY),
                (&i64::from(request.limit), Type::INT8),
            ],
        )
        .await
        .map_err(|e| super::classify(e, None))?;
        rows.iter().map(|row| self.info_from_row(row)).collect()
    }

    /// The largest segment a replica may lease in `namespace`; `NOT_FOUND` if it does not
    /// exist (and auto-creation is off, or creating it failed).
    pub async fn segment_limit(&self, namespace: &Namespace) -> Result<u64, Error> {
        let client = self.client().await?;
        let mut own = own_max_block(&client, self.settings.pool_mode, namespace).await?;
        if own.is_none() && self.settings.auto_create {
            self.create_default(&client, namespace).await?;
            own = own_max_block(&client, self.settings.pool_mode, namespace).await?;
        }
        let own =
            own.ok_or_else(|| Error::NotFound(format!("namespace {namespace} does not exist")))?;
        Ok(own
            .map_or(self.settings.max_block, |b| b as u64)
            .min(self.settings.max_block))
    }

    pub(super) async fn require_namespace(
        &self,
        client: &Object,
        namespace: &Namespace,
    ) -> Result<(), Error> {
        let exists = sql::query_opt(
            client,
            self.settings.pool_mode,
            "SELECT 1 FROM id_namespaces WHERE name = $1",
            &[(&namespace.as_str(), Type::TEXT)],
        )
        .await
        .map_err(|e| db_error(e, namespace))?
        .is_some();
        if exists {
            Ok(())
        } else {
            Err(Error::NotFound(format!(
                "namespace {namespace} does not exist"
            )))
        }
    }

    fn info_from_row(&self, row: &Row) -> Result<NamespaceInfo, Error> {
        let read = || -> Result<NamespaceInfo, tokio_postgres::Error> {
            let first_id: i64 = row.try_get(1)?;
            let max_block: Option<i64> = row.try_get(3)?;
            let last_value: Option<i64> = row.try_get(4)?;
            let created_at: DateTime<Utc> = row.try_get(6)?;
            let read_at: DateTime<Utc> = row.try_get(7)?;
            let first_in_window: Option<i64> = row.try_get(11)?;
            let last_id = last_value.unwrap_or(first_id - 1);
            // The cursor's advance since the first lease of the window, over the window (or
            // the namespace's age, if younger).
            let advance = first_in_window.map_or(0, |lower| (last_id - lower + 1).max(0));
            let age = (read_at - created_at).as_seconds_f64().max(1.0);
            Ok(NamespaceInfo {
                name: row.try_get(0)?,
                first_id: first_id as u64,
                max_id: row.try_get::<_, i64>(2)? as u64,
                max_block: max_block.map_or(self.settings.max_block, |b| b as u64),
                last_id: last_id.max(0) as u64,
                ids_granted: row.try_get::<_, i64>(5)? as u64,
                grant_rate_per_second: advance as f64 / age.min(RATE_WINDOW_SECONDS),
                created_at,
                read_at,
                timeline: row.try_get::<_, i64>(8)?.max(0) as u64,
                timeline_jumps: row.try_get::<_, i64>(9)?.max(0) as u64,
                last_jump_at: row.try_get(10)?,
            })
        };
        read().map_err(|e| Error::Internal(format!("decode a namespace row: {e}")))
    }
}

/// The namespace's own block limit: `None` if the namespace does not exist, `Some(None)` if it
/// has none.
async fn own_max_block(
    client: &Object,
    mode: PoolMode,
    namespace: &Namespace,
) -> Result<Option<Option<i64>>, Error> {
    let row = sql::query_opt(
        client,
        mode,
        "SELECT max_block FROM id_namespaces WHERE name = $1",
        &[(&namespace.as_str(), Type::TEXT)],
    )
    .await
    .map_err(|e| db_error(e, namespace))?;
    row.map(|row| row.try_get(0))
        .transpose()
        .map_err(|e| Error::Internal(format!("decode max_block: {e}")))
}

async fn create_with(
    client: &Object,
    mode: PoolMode,
    namespace: &Namespace,
    first_id: u64,
    max_id: u64,
    max_block: Option<u64>,
) -> Result<bool, Error> {
    let row = sql::query_opt(
        client,
        mode,
        "SELECT id_create_namespace($1, $2, $3, $4)",
        &[
            (&namespace.as_str(), Type::TEXT),
            (&bigint(first_id), Type::INT8),
            (&bigint(max_id), Type::INT8),
            (&max_block.map(bigint), Type::INT8),
        ],
    )
    .await
    .map_err(|e| db_error(e, namespace))?
    .ok_or_else(|| Error::Internal("id_create_namespace returned no row".into()))?;
    row.try_get(0).map_err(|e| db_error(e, namespace))
}
