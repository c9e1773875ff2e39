//! How the store sends a statement, by the pooler's mode (`SHORTENER_DATABASE_POOL_MODE`), in
//! one place for every module's SQL.
//!
//! In session mode (the default) a statement goes as it always has: `prepared_*` calls are
//! prepared once per connection and cached, the others are prepared for the call and closed.
//! In transaction mode a pooler such as PgBouncer hands the server connection to another
//! client after every transaction, so nothing may outlive one: every statement is sent
//! unnamed, parsed, bound and run in one round trip (`query_typed`). Its parameter types are
//! learnt once per statement text, by preparing it inside a transaction (the caller's, or
//! one opened for it) and closing it before that transaction ends, and kept in [`Sending`]'s
//! cache.

use deadpool_postgres::{GenericClient, Object, Pool, PoolError, Transaction};
use futures::{FutureExt, StreamExt, pin_mut};
use pgtls::pooler::PoolMode;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Error, Row};

/// Most statement texts whose parameter types are kept; past it the cache starts again.
const MAX_DESCRIBED: usize = 2_048;

/// The parameters of a statement, as tokio-postgres takes them.
type Params<'a> = &'a [&'a (dyn ToSql + Sync)];
/// The same with their types, as an unnamed statement takes them.
type TypedParams<'a> = &'a [(&'a (dyn ToSql + Sync), Type)];

/// How statements are sent: the pool mode and, in transaction mode, the parameter types of
/// the statements described so far. Cheap to clone.
#[derive(Clone, Default)]
pub(super) struct Sending {
    mode: PoolMode,
    types: Arc<Mutex<HashMap<String, Arc<[Type]>>>>,
}

impl Sending {
    /// Sending for a pooler in `mode`.
    pub(super) fn new(mode: PoolMode) -> Self {
        Self {
            mode,
            types: Arc::default(),
        }
    }

    /// The pool mode statements are sent for.
    pub(super) fn mode(&self) -> PoolMode {
        self.mode
    }

    fn known(&self, sql: &str) -> Option<Arc<[Type]>> {
        let types = self.types.lock().unwrap_or_else(|e| e.into_inner());
        types.get(sql).cloned()
    }

    fn learn(&self, sql: &str, params: Arc<[Type]>) {
        let mut types = self.types.lock().unwrap_or_else(|e| e.into_inner());
        if types.len() >= MAX_DESCRIBED {
            types.clear();
        }
        types.insert(sql.to_string(), params);
    }
}

/// A pool and how statements go over its connections. Cheap to clone.
#[derive(Clone)]
pub(super) struct Pooled {
    /// The connections.
    pub(super) pool: Pool,
    /// How statements are sent over them.
    pub(super) sending: Sending,
}

impl Pooled {
    /// A connection from the pool.
    pub(super) async fn get(&self) -> Result<Conn, PoolError> {
        Ok(self.wrap(self.pool.get().await?))
    }

    /// `client`, sending as this pool does.
    pub(super) fn wrap(&self, client: Object) -> Conn {
        Db {
            inner: client,
            sending: self.sending.clone(),
        }
    }
}

impl super::PgStore {
    /// Each pool's connections now, by the pool's name (`primary`, and `replica` where reads
    /// have one): for `/metrics`.
    pub fn pools(&self) -> Vec<(&'static str, deadpool_postgres::Status)> {
        let mut pools = vec![("primary", self.pool.pool.status())];
        if let Some(replica) = &self.replica {
            pools.push(("replica", replica.pool_status()));
        }
        pools
    }
}

/// A pooled connection and how statements go over it.
pub(super) type Conn = Db<Object>;
/// A transaction on a pooled connection and how statements go over it.
pub(super) type Tx<'a> = Db<Transaction<'a>>;

/// A connection or a transaction on one, which sends every statement as its [`Sending`] says.
pub(super) struct Db<C> {
    inner: C,
    sending: Sending,
}

/// What [`Db`] sends statements over: a pooled connection or a transaction on one.
pub(super) trait Link: Sync + Send {
    /// The connection or transaction as deadpool gives it.
    type Client: GenericClient;
    /// The connection or transaction as deadpool gives it.
    fn generic(&self) -> &Self::Client;
    /// The same, as tokio-postgres gives it (for unnamed statements).
    fn typed(&self) -> Typed<'_>;
    /// Whether a transaction is open on it (a statement may be prepared and closed in it).
    fn in_transaction(&self) -> bool;
}

/// A tokio-postgres connection or transaction, for its unnamed (`query_typed`) calls.
pub(super) enum Typed<'a> {
    /// A connection.
    Client(&'a tokio_postgres::Client),
    /// A transaction.
    Transaction(&'a tokio_postgres::Transaction<'a>),
}

impl Typed<'_> {
    async fn query_typed(&self, sql: &str, params: TypedParams<'_>) -> Result<Vec<Row>, Error> {
        match self {
            Typed::Client(c) => c.query_typed(sql, params).await,
            Typed::Transaction(t) => t.query_typed(sql, params).await,
        }
    }

    async fn query_typed_one(&self, sql: &str, params: TypedParams<'_>) -> Result<Row, Error> {
        match self {
            Typed::Client(c) => c.query_typed_one(sql, params).await,
            Typed::Transaction(t) => t.query_typed_one(sql, params).await,
        }
    }

    async fn query_typed_opt(
        &self,
        sql: &str,
        params: TypedParams<'_>,
    ) -> Result<Option<Row>, Error> {
        match self {
            Typed::Client(c) => c.query_typed_opt(sql, params).await,
            Typed::Transaction(t) => t.query_typed_opt(sql, params).await,
        }
    }

    /// How many rows `sql` changed, read once its answer has ended.
    async fn execute_typed(&self, sql: &str, params: TypedParams<'_>) -> Result<u64, Error> {
        let params = params.iter().cloned();
        let rows = match self {
            Typed::Client(c) => c.query_typed_raw(sql, params).await?,
            Typed::Transaction(t) => t.query_typed_raw(sql, params).await?,
        };
        pin_mut!(rows);
        while let Some(row) = rows.next().await {
            row?;
        }
        Ok(rows.rows_affected().unwrap_or(0))
    }
}

impl Link for Object {
    type Client = Object;
    fn generic(&self) -> &Self::Client {
        self
    }
    fn typed(&self) -> Typed<'_> {
        Typed::Client(self)
    }
    fn in_transaction(&self) -> bool {
        false
    }
}

impl Link for Transaction<'_> {
    type Client = Self;
    fn generic(&self) -> &Self::Client {
        self
    }
    fn typed(&self) -> Typed<'_> {
        Typed::Transaction(self)
    }
    fn in_transaction(&self) -> bool {
        true
    }
}

/// Pairs `params` with their types.
fn typed_params<'a>(params: Params<'a>, types: &'a [Type]) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    params.iter().copied().zip(types.iter().cloned()).collect()
}

/// Sends `$sql` with `$params` over `$db` by its pool mode: in session mode with the
/// tokio-postgres method `$session` (on the statement prepared once per connection if
/// `$cache`, else on the text), in transaction mode unnamed with [`Typed`]'s `$typed`.
macro_rules! send {
    ($db:expr, $sql:expr, $params:expr, $cache:expr, $session:ident, $typed:ident) => {{
        let client = $db.inner.generic();
        match ($db.sending.mode, $cache) {
            (PoolMode::Session, true) => {
                let statement = client.prepare_cached($sql).await?;
                client.$session(&statement, $params).await
            }
            (PoolMode::Session, false) => client.$session($sql, $params).await,
            (PoolMode::Transaction, _) => {
                let types = $db.types($sql).await?;
                let params = typed_params($params, &types);
                $db.inner.typed().$typed($sql, &params).await
            }
        }
    }};
}

impl<C: Link> Db<C> {
    /// The rows of `sql` (prepared for the call in session mode).
    pub(super) async fn query(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, Error> {
        send!(self, sql, params, false, query, query_typed)
    }

    /// The rows of `sql`, prepared once per connection in session mode.
    pub(super) async fn prepared_query(
        &self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<Row>, Error> {
        send!(self, sql, params, true, query, query_typed)
    }

    /// The one row of `sql`; an error if there is none or more.
    pub(super) async fn query_one(&self, sql: &str, params: Params<'_>) -> Result<Row, Error> {
        send!(self, sql, params, false, query_one, query_typed_one)
    }

    /// [`Db::query_one`], prepared once per connection in session mode.
    pub(super) async fn prepared_query_one(
        &self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Row, Error> {
        send!(self, sql, params, true, query_one, query_typed_one)
    }

    /// The row of `sql` if there is one; an error if there are more.
    pub(super) async fn query_opt(
        &self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Option<Row>, Error> {
        send!(self, sql, params, false, query_opt, query_typed_opt)
    }

    /// [`Db::query_opt`], prepared once per connection in session mode.
    pub(super) async fn prepared_query_opt(
        &self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Option<Row>, Error> {
        send!(self, sql, params, true, query_opt, query_typed_opt)
    }

    /// How many rows `sql` changed.
    pub(super) async fn execute(&self, sql: &str, params: Params<'_>) -> Result<u64, Error> {
        send!(self, sql, params, false, execute, execute_typed)
    }

    /// [`Db::execute`], prepared once per connection in session mode.
    pub(super) async fn prepared_execute(
        &self,
        sql: &str,
        params: Params<'_>,
    ) -> Result<u64, Error> {
        send!(self, sql, params, true, execute, execute_typed)
    }

    /// Runs `sql` (one or more statements, no parameters) as a simple query, which names no
    /// statement in either mode.
    pub(super) async fn batch_execute(&self, sql: &str) -> Result<(), Error> {
        self.inner.generic().batch_execute(sql).await
    }

    /// The parameter types of `sql`: from the cache, or learnt by preparing it inside a
    /// transaction (this one, or one opened for it) and closing it before that ends, so no
    /// named statement is left on the server connection.
    async fn types(&self, sql: &str) -> Result<Arc<[Type]>, Error> {
        if let Some(types) = self.sending.known(sql) {
            return Ok(types);
        }
        let client = self.inner.generic();
        let own = !self.inner.in_transaction();
        // Armed before `BEGIN` goes out: a caller that goes away from here on (a client that
        // disconnected, a call past its deadline) must not hand the pool a connection inside
        // this transaction, where the next user's writes would be answered uncommitted.
        let mut unended = match self.inner.typed() {
            Typed::Client(raw) if own => Unended(Some(raw)),
            _ => Unended(None),
        };
        if own {
            client.batch_execute("BEGIN").await?;
        }
        let described = client.prepare(sql).await;
        // Dropping the statement queues its Close ahead of the transaction's end.
        let described = described.map(|statement| Arc::<[Type]>::from(statement.params()));
        if own {
            let end = if described.is_ok() {
                "COMMIT"
            } else {
                "ROLLBACK"
            };
            let ended = client.batch_execute(end).await;
            unended.0 = None;
            // A failed statement's own error says more than its rollback's.
            if described.is_ok() {
                ended?;
            }
        }
        let types = described?;
        self.sending.learn(sql, Arc::clone(&types));
        Ok(types)
    }
}

/// The connection of a transaction [`Db::types`] opened, until its end was answered: dropped
/// before then, it queues a `ROLLBACK` on the connection, as tokio-postgres's own transactions
/// do, so whatever the connection runs next runs outside it. A `ROLLBACK` that finds the
/// transaction already ended only draws a warning.
struct Unended<'c>(Option<&'c tokio_postgres::Client>);

impl Drop for Unended<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            // The first poll puts the statement on the connection's queue; its answer is not
            // waited for.
            let _ = client.batch_execute("ROLLBACK").now_or_never();
        }
    }
}

impl Conn {
    /// Opens a transaction on the connection; it sends statements as the connection does.
    pub(super) async fn transaction(&mut self) -> Result<Tx<'_>, Error> {
        let sending = self.sending.clone();
        Ok(Db {
            inner: self.inner.transaction().await?,
            sending,
        })
    }

    /// The pooled connection itself: for simple-protocol statements, which name nothing, and
    /// for what needs a session of its own (only on a direct connection).
    pub(super) fn raw(&self) -> &Object {
        &self.inner
    }

    /// The pooled connection itself, for a session's work on a direct connection.
    pub(super) fn into_raw(self) -> Object {
        self.inner
    }

    /// [`Conn::raw`], for transactions of the tokio-postgres client itself (a direct session).
    pub(super) fn raw_mut(&mut self) -> &mut Object {
        &mut self.inner
    }
}

impl Tx<'_> {
    /// Commits the transaction.
    pub(super) async fn commit(self) -> Result<(), Error> {
        self.inner.commit().await
    }

    /// Rolls the transaction back.
    pub(super) async fn rollback(self) -> Result<(), Error> {
        self.inner.rollback().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deadpool_postgres::{Manager, ManagerConfig, RecyclingMethod};

    /// A pool of one connection to a fresh database, sending as behind a transaction pooler.
    async fn one_connection() -> (testkit::TestDb, Pooled) {
        let db = testkit::TestDb::create().await;
        let config: tokio_postgres::Config = db.url().parse().expect("URL");
        let manager = Manager::from_config(
            config,
            tokio_postgres::NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager).max_size(1).build().expect("pool");
        let pooled = Pooled {
            pool,
            sending: Sending::new(PoolMode::Transaction),
        };
        (db, pooled)
    }

    /// A statement's description opens a transaction of its own; a caller that goes away
    /// while it is open (here after `BEGIN` went out) leaves none open on the connection the
    /// pool hands to the next user, whose writes would otherwise wait in it uncommitted.
    #[tokio::test]
    async fn a_description_left_midway_leaves_no_transaction_open() {
        let (_db, pooled) = one_connection().await;
        {
            let conn = pooled.get().await.expect("connection");
            // One poll sends `BEGIN`; its answer cannot have come (this runtime's one thread
            // is here), and the caller goes away.
            assert!(conn.types("SELECT $1::int8").now_or_never().is_none());
        }
        let conn = pooled
            .get()
            .await
            .expect("the same connection, back in the pool");
        let refused = conn
            .raw()
            .batch_execute("SAVEPOINT probe")
            .await
            .expect_err("no transaction is open, so a savepoint is refused");
        assert_eq!(
            refused.code(),
            Some(&tokio_postgres::error::SqlState::NO_ACTIVE_SQL_TRANSACTION),
            "{refused}"
        );
        // The description, run to its end, still works on that connection.
        let types = conn.types("SELECT $1::int8").await.expect("described");
        assert_eq!(&*types, &[Type::INT8]);
        conn.raw()
            .batch_execute("SAVEPOINT probe")
            .await
            .expect_err("and leaves no transaction open either");
    }
}
