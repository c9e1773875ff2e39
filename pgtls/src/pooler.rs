//! Running behind a connection pooler such as PgBouncer: which pooling mode the services are
//! told the pooler uses, and what they do differently in each.
//!
//! - `session` (the default): a client keeps one server connection for its whole session, as
//!   if it talked to PostgreSQL itself. Everything works as without a pooler.
//! - `transaction`: the pooler hands the server connection to another client after every
//!   transaction. Nothing may outlive a transaction on it: no prepared statement (the services
//!   send each statement unnamed, parsed and bound in one round trip), no session setting, no
//!   session advisory lock, no LISTEN. What needs those (migrations, the change feed, advisory
//!   locks) takes a direct connection of its own, from the service's `*_DATABASE_DIRECT_URL`.

use std::fmt;
use std::str::FromStr;

/// The pooler's mode, as a service's `*_DATABASE_POOL_MODE` setting names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PoolMode {
    /// One server connection per client session (or no pooler at all).
    #[default]
    Session,
    /// The server connection changes between transactions.
    Transaction,
}

impl FromStr for PoolMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        // Any case, as PgBouncer's own `pool_mode` is written.
        match text.to_ascii_lowercase().as_str() {
            "session" => Ok(PoolMode::Session),
            "transaction" => Ok(PoolMode::Transaction),
            _ => Err(format!(
                "unknown pool mode {text:?}: expected session or transaction (statement \
                 pooling cannot run multi-statement transactions and is not supported)"
            )),
        }
    }
}

impl fmt::Display for PoolMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PoolMode::Session => "session",
            PoolMode::Transaction => "transaction",
        })
    }
}

/// What to add to an error whose cause is probably a pooler in transaction mode while the
/// service was told `session`: a prepared statement that vanished (26000) or already exists on
/// the server connection another client left (42P05).
pub fn explain_statement_error(error: &tokio_postgres::Error, mode: PoolMode) -> Option<String> {
    let db = error.as_db_error()?;
    let code = db.code().code();
    let statement = db.message().contains("prepared statement");
    (mode == PoolMode::Session && statement && (code == "26000" || code == "42P05")).then(|| {
        "a pooler in transaction mode between this service and PostgreSQL? Its pool mode \
         setting says session; set it to transaction (and a direct URL), or run the pooler \
         in session mode"
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_in_any_case_and_print_back_and_others_are_refused() {
        for mode in [PoolMode::Session, PoolMode::Transaction] {
            assert_eq!(mode.to_string().parse::<PoolMode>(), Ok(mode));
        }
        assert_eq!("Transaction".parse::<PoolMode>(), Ok(PoolMode::Transaction));
        assert_eq!("SESSION".parse::<PoolMode>(), Ok(PoolMode::Session));
        for bad in ["", "statement", "txn"] {
            let error = bad.parse::<PoolMode>().expect_err(bad);
            assert!(error.contains("session or transaction"), "{error}");
        }
    }
}
