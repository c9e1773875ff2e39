//! How the ledger sends a statement, by the pooler's mode (`ID_SERVICE_DATABASE_POOL_MODE`):
//! in session mode each statement is prepared once per connection and cached, as before; in
//! transaction mode it is sent unnamed, with its parameter types, parsed, bound and run in one
//! round trip, so nothing is left on a server connection the pooler hands to another client.

use deadpool_postgres::Object;
use pgtls::pooler::PoolMode;
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

/// A parameter and its PostgreSQL type.
pub(super) type Param<'a> = (&'a (dyn ToSql + Sync), Type);

/// The rows of `sql` with `params`, read up to the server's ReadyForQuery.
pub(super) async fn query(
    client: &Object,
    mode: PoolMode,
    sql: &str,
    params: &[Param<'_>],
) -> Result<Vec<Row>, tokio_postgres::Error> {
    match mode {
        PoolMode::Session => {
            let statement = client.prepare_cached(sql).await?;
            let values: Vec<&(dyn ToSql + Sync)> = params.iter().map(|(v, _)| *v).collect();
            client.query(&statement, &values).await
        }
        PoolMode::Transaction => client.query_typed(sql, params).await,
    }
}

/// The first row of `sql` with `params`, if any. Like [`query`], it reads the server's answer to
/// its end (ReadyForQuery): an autocommit statement's commit has happened when it returns.
pub(super) async fn query_opt(
    client: &Object,
    mode: PoolMode,
    sql: &str,
    params: &[Param<'_>],
) -> Result<Option<Row>, tokio_postgres::Error> {
    Ok(query(client, mode, sql, params).await?.into_iter().next())
}
