//! Turning a [`Config`] into what a node runs on: its store (migrated), code space, API keys
//! and lease source. `serve`, `migrate` and `preload` all start here.
//!
//! Embedded mode (no `DATABASE_URL`): a SQLite file in the data directory holds links and the
//! lease ledger; a code-space key and an API key are generated there on first start (0600) unless
//! configured. Distributed mode: PostgreSQL, the id-service, and keys that must be configured.

use super::lease_source::Explained;
use crate::access::{ApiKeys, YourlsTokens, generate_api_key, parse_legacy};
use crate::config::{Config, IdsConfig, StoreConfig};
use crate::links::CursorKey;
use crate::secrets;
use crate::signin::SessionTags;
use crate::store::{Capabilities, PgSettings, PgStore, SqliteStore, Store};
use anyhow::Context;
use codespace::{CodeKey, CodeSpace};
use id_client::{GrpcLeaseSource, GrpcSourceConfig, LeaseSource};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The name of the SQLite file in the data directory.
pub const DB_FILE: &str = "shortener.db";
/// The generated code-space key file in the data directory.
pub const KEY_FILE: &str = "code.key";
/// The generated API key file in the data directory.
pub const API_KEYS_FILE: &str = "api-keys";

/// Everything a node needs besides its listeners.
pub struct Resources {
    /// The link store.
    pub store: Store,
    /// The code space (key and base length), shared by the service and the embedded store.
    pub space: Arc<CodeSpace>,
    /// The key list cursors are sealed with (derived from the code-space key).
    pub cursors: CursorKey,
    /// The secret YOURLS tokens are derived under (derived from the code-space key).
    pub yourls_tokens: YourlsTokens,
    /// The secret console session cookies are tagged under (derived from the code-space key).
    pub session_tags: SessionTags,
    /// Accepted API keys (the keys file is re-read while the node runs).
    pub api_keys: Arc<ApiKeys>,
    /// Where IDs come from.
    pub lease_source: Arc<dyn LeaseSource>,
    /// The API key file the node made for itself (embedded mode with no keys configured), to
    /// tell the operator at every start.
    pub default_api_key: Option<DefaultApiKey>,
}

/// The API key an embedded node makes for itself when no keys are configured.
#[derive(Debug, Clone)]
pub struct DefaultApiKey {
    /// The file holding it (its first line is the key).
    pub path: PathBuf,
    /// Whether this start wrote it (otherwise an earlier start did).
    pub made_now: bool,
}

/// This node's name: its host name and process id (what an audit entry a node records on its
/// own, such as a roles file reload, names it by).
pub(crate) fn default_holder() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".into());
    format!("{host}-{}", std::process::id())
}

fn load_key(ids: &IdsConfig, generated_default: Option<&Path>) -> anyhow::Result<CodeKey> {
    if let Some(text) = &ids.key {
        return CodeKey::parse(text).context("parse SHORTENER_KEY");
    }
    if let Some(path) = &ids.key_file {
        return secrets::read_code_key(path);
    }
    let path = generated_default
        .context("a code-space key is required (SHORTENER_KEY_FILE or SHORTENER_KEY)")?;
    if path.exists() {
        secrets::read_code_key(path)
    } else {
        let key = secrets::generate_code_key_file(path, false)?;
        tracing::info!(path = %path.display(), fingerprint = %key.fingerprint(), "generated a code-space key");
        Ok(key)
    }
}

/// The code space of a deployment and the secrets derived from its key.
struct Keyed {
    space: Arc<CodeSpace>,
    cursors: CursorKey,
    yourls_tokens: YourlsTokens,
    session_tags: SessionTags,
}

/// The code space of `ids`: its key (loaded or, embedded, generated) and base length, with
/// the secrets derived from the key.
fn code_space(ids: &IdsConfig, generated_default: Option<&Path>) -> anyhow::Result<Keyed> {
    let key = load_key(ids, generated_default)?;
    let space = CodeSpace::new(&key, ids.code_length).context("configure the code space")?;
    tracing::info!(fingerprint = %space.fingerprint(), length = ids.code_length, "code space ready");
    Ok(Keyed {
        space: Arc::new(space),
        cursors: CursorKey::derive(&key),
        yourls_tokens: YourlsTokens::derive(&key),
        session_tags: SessionTags::derive(&key),
    })
}

fn load_api_keys(
    config: &Config,
    generated_default: Option<&Path>,
) -> anyhow::Result<(ApiKeys, Option<DefaultApiKey>)> {
    let fixed = parse_legacy(config.access.api_keys.iter().map(String::as_str))
        .map_err(anyhow::Error::msg)?;
    let mut default_key = None;
    let file = match (&config.access.api_keys_file, generated_default) {
        (Some(path), _) => Some(path.clone()),
        (None, Some(default)) if fixed.is_empty() => {
            let made_now = !default.exists();
            if made_now {
                secrets::write_secret_file(default, &format!("{}\n", generate_api_key()), false)?;
            }
            default_key = Some(DefaultApiKey {
                path: default.to_path_buf(),
                made_now,
            });
            Some(default.to_path_buf())
        }
        _ => None,
    };
    let keys = ApiKeys::load(fixed, file).map_err(anyhow::Error::msg)?;
    Ok((keys, default_key))
}

/// The PostgreSQL store at `url` under the code space of `ids`, migrated and its read replica
/// checked; all `shortener layout` needs, and the start of a node's resources.
async fn open_postgres(
    store: &StoreConfig,
    ids: &IdsConfig,
    url: &str,
) -> anyhow::Result<(PgStore, Keyed)> {
    let keyed = code_space(ids, None)?;
    let pg = PgStore::connect(&PgSettings {
        url: url.to_string(),
        read_url: store.database_read_url.clone(),
        ca_file: store.database_ca_file.clone(),
        max_connections: store.database_max_connections,
        timeout: Duration::from_secs(3),
        write_batch: store.write_batch,
        write_concurrency: store.write_concurrency,
        write_fill: store.write_fill,
        statement_timeout: Duration::from_millis(store.database_statement_timeout_ms),
        space: Arc::clone(&keyed.space),
        pool_mode: store.database_pool_mode,
        direct_url: store.database_direct_url.clone(),
    })
    .context("configure the PostgreSQL pool")?;
    // No primary among the URL's hosts (an HA cluster between leaders): wait for one.
    pgtls::evict::wait_for_primary(
        "apply PostgreSQL migrations",
        || pg.migrate(),
        |e| matches!(e, crate::store::StoreError::Unavailable(m) if m.contains(pgtls::evict::NO_PRIMARY)),
    )
    .await
    .context("open the PostgreSQL store (its migrations, and the code key its links were made with)")?;
    pg.verify_replica()
        .await
        .context("check SHORTENER_DATABASE_READ_URL")?;
    Ok((pg, keyed))
}

/// The PostgreSQL store of `store` under the code space of `ids`, migrated: for commands that
/// work on the store alone (`shortener layout`), without the node's keys or id-service.
pub async fn postgres_store(store: &StoreConfig, ids: &IdsConfig) -> anyhow::Result<PgStore> {
    let url = store
        .database_url
        .as_deref()
        .context("DATABASE_URL is required")?;
    Ok(open_postgres(store, ids, url).await?.0)
}

/// Builds the store, keys and lease source for `config` and applies migrations (within a
/// tokio runtime: the PostgreSQL store starts its writer task).
pub async fn prepare(config: &Config) -> anyhow::Result<Resources> {
    let holder = config.ids.holder.clone().unwrap_or_else(default_holder);
    match &config.store.database_url {
        Some(url) => {
            let (pg, keyed) = open_postgres(&config.store, &config.ids, url).await?;
            let Keyed {
                space,
                cursors,
                yourls_tokens,
                session_tags,
            } = keyed;
            let (api_keys, _) = load_api_keys(config, None)?;
            let api_keys = Arc::new(api_keys);
            let source = GrpcLeaseSource::new(&GrpcSourceConfig {
                endpoints: config.ids.id_service.clone(),
                namespace: config.ids.id_namespace.clone(),
                holder,
                token: config.ids.id_service_token.clone(),
                connect_timeout: Duration::from_secs(2),
                // Below the pool's lease timeout, so a slow answer is told as the id-service's.
                request_timeout: Duration::from_secs(4),
            })
            .context("configure the id-service client")?;
            let source = Explained::new(source, &config.ids.id_namespace);
            Ok(Resources {
                store: Store::Postgres(pg),
                space,
                cursors,
                yourls_tokens,
                session_tags,
                api_keys,
                lease_source: Arc::new(source),
                default_api_key: None,
            })
        }
        None => {
            let dir = &config.store.data_dir;
            create_private_dir(dir)?;
            let Keyed {
                space,
                cursors,
                yourls_tokens,
                session_tags,
            } = code_space(&config.ids, Some(&dir.join(KEY_FILE)))?;
            // On a blocking thread: the open waits up to seconds for another process to let
            // go of the file's one-writer lock, which must not hold up a runtime thread.
            let (path, opened_space, batch) = (
                dir.join(DB_FILE),
                Arc::clone(&space),
                config.store.write_batch,
            );
            let sqlite =
                tokio::task::spawn_blocking(move || SqliteStore::open(&path, opened_space, batch))
                    .await
                    .context("open the SQLite store")?
                    .context("open the SQLite store")?;
            sqlite.set_read_deadline(Duration::from_millis(
                config.store.database_statement_timeout_ms,
            ));
            sqlite.migrate().await.context("apply SQLite migrations")?;
            let (api_keys, default_api_key) =
                load_api_keys(config, Some(&dir.join(API_KEYS_FILE)))?;
            let api_keys = Arc::new(api_keys);
            let store = Store::Sqlite(sqlite);
            let lease_source = store
                .embedded_lease_source(&config.ids.id_namespace, &holder)
                .context("the embedded store keeps its own lease ledger")?;
            Ok(Resources {
                store,
                space,
                cursors,
                yourls_tokens,
                session_tags,
                api_keys,
                lease_source,
                default_api_key,
            })
        }
    }
}

/// Creates the data directory readable by its owner only (0700). An existing directory is
/// left as it is: if others can read or enter it, that is logged as a warning (the keys and
/// the links live there), not silently changed.
fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir)
                .with_context(|| format!("read data directory {}", dir.display()))?
                .permissions()
                .mode();
            if mode & 0o077 != 0 {
                tracing::warn!(
                    dir = %dir.display(),
                    mode = format!("{:o}", mode & 0o777),
                    "the data directory is open to other users; it holds the code key, the API keys and the links (chmod 700 it)"
                );
            }
        }
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .with_context(|| format!("create data directory {}", dir.display()))
}
