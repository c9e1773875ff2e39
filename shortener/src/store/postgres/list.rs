//! Lists and exports: one query per page, ordered by (`created_at`, `code`) descending and
//! continued by keyset, so a page deep in a list costs what the first one does; an export walks
//! the same pages one query at a time (`links::export`).

use super::error::db_error;
use super::send::Conn;
use super::{L_LINK_COLUMNS, link_with_clicks};
use crate::domain::{DomainFilter, Link, ListQuery, Page, Position, StateFilter};
use crate::store::StoreError;
use tokio_postgres::types::ToSql;

/// A query's SQL and parameters.
struct Sql {
    text: String,
    params: Vec<Box<dyn ToSql + Sync + Send>>,
}

impl Sql {
    fn param(&mut self, value: impl ToSql + Sync + Send + 'static) -> String {
        self.params.push(Box::new(value));
        format!("${}", self.params.len())
    }
}

/// `%` and `_` in `text` escaped for `LIKE ... ESCAPE '\'`.
fn like_escaped(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

/// A tag's rows joined to their links on the columns `links_tenant_created` is ordered by, so
/// each link is one index probe in either layout (the code alone is indexed only for named
/// codes in the slot layout).
/// Whether a listed link (`l`, its click counts `c`) is past its visit limit.
const USED_UP: &str = "(l.max_visits IS NOT NULL AND coalesce(c.human, 0) >= l.max_visits)";

const TAGGED: &str = "link_tags t JOIN links l ON l.tenant = t.tenant AND l.created_at = t.created_at AND l.code = t.code";

/// The SQL of `query`, with `limit` rows at most (none for an export).
fn build(query: &ListQuery, limit: Option<usize>) -> Sql {
    let mut sql = Sql {
        text: String::new(),
        params: Vec::new(),
    };
    let mut conditions: Vec<String> = Vec::new();
    // With a tag, the tag rows lead: they are ordered as the list is.
    let from = match (&query.tag, &query.tenant) {
        (Some(tag), Some(tenant)) => {
            let (t, g) = (sql.param(tenant.clone()), sql.param(tag.clone()));
            conditions.push(format!("t.tenant = {t} AND t.tag = {g}"));
            TAGGED.to_string()
        }
        (Some(tag), None) => {
            let g = sql.param(tag.clone());
            conditions.push(format!("t.tag = {g}"));
            TAGGED.to_string()
        }
        (None, _) => "links l".to_string(),
    };
    if let Some(tenant) = &query.tenant {
        let t = sql.param(tenant.clone());
        conditions.push(format!("l.tenant = {t}"));
    }
    // The columns the order and the keyset run on: the leading table's, so its index serves.
    let key = if query.tag.is_some() { "t" } else { "l" };
    if let Some(Position { created_at, code }) = &query.after {
        let (at, c) = (sql.param(*created_at), sql.param(code.clone()));
        conditions.push(format!("({key}.created_at, {key}.code) < ({at}, {c})"));
    }
    match query.state {
        StateFilter::Active => {
            let now = sql.param(query.now);
            conditions.push(format!(
                "l.deleted_at IS NULL AND l.disabled_at IS NULL AND (l.expires_at IS NULL OR l.expires_at > {now}) \
                 AND NOT {USED_UP}"
            ));
        }
        StateFilter::UsedUp => {
            let now = sql.param(query.now);
            conditions.push(format!(
                "l.deleted_at IS NULL AND l.disabled_at IS NULL AND (l.expires_at IS NULL OR l.expires_at > {now}) \
                 AND {USED_UP}"
            ));
        }
        StateFilter::Expired => {
            let now = sql.param(query.now);
            conditions.push(format!(
                "l.deleted_at IS NULL AND l.disabled_at IS NULL AND l.expires_at <= {now}"
            ));
        }
        StateFilter::Disabled => {
            conditions.push("l.deleted_at IS NULL AND l.disabled_at IS NOT NULL".into())
        }
        StateFilter::Deleted => conditions.push("l.deleted_at IS NOT NULL".into()),
        StateFilter::All => {}
    }
    if let Some(after) = query.created_after {
        let p = sql.param(after);
        conditions.push(format!("l.created_at >= {p}"));
    }
    if let Some(before) = query.created_before {
        let p = sql.param(before);
        conditions.push(format!("l.created_at < {p}"));
    }
    if let Some(host) = &query.host {
        let exact = sql.param(host.reversed.clone());
        if host.subdomains {
            let prefix = sql.param(format!("{}.%", like_escaped(&host.reversed)));
            conditions.push(format!(
                "(l.host_rev = {exact} OR l.host_rev LIKE {prefix} ESCAPE '\\')"
            ));
        } else {
            conditions.push(format!("l.host_rev = {exact}"));
        }
    }
    match &query.domain {
        None => {}
        Some(DomainFilter::Default) => conditions.push("l.domain IS NULL".into()),
        Some(DomainFilter::Host(host)) => {
            let p = sql.param(host.clone());
            conditions.push(format!("l.domain = {p}"));
        }
    }
    if let Some(q) = &query.q {
        let p = sql.param(format!("%{}%", like_escaped(q)));
        conditions.push(format!("l.long_url LIKE {p} ESCAPE '\\'"));
    }
    sql.text = format!(
        "SELECT {L_LINK_COLUMNS}, c.human, c.head, c.bot FROM {from} \
         LEFT JOIN link_clicks c ON c.code = l.code WHERE {} \
         ORDER BY {key}.created_at DESC, {key}.code DESC",
        if conditions.is_empty() {
            "true".to_string()
        } else {
            conditions.join(" AND ")
        }
    );
    if let Some(limit) = limit {
        let p = sql.param(limit as i64);
        sql.text.push_str(&format!(" LIMIT {p}"));
    }
    sql
}

fn params(sql: &Sql) -> Vec<&(dyn ToSql + Sync)> {
    sql.params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

/// One page of `query`.
pub(super) async fn list(client: &Conn, query: &ListQuery) -> Result<Page, StoreError> {
    let sql = build(query, Some(query.limit + 1));
    let rows = client
        .query(&sql.text, &params(&sql))
        .await
        .map_err(db_error)?;
    let mut links: Vec<Link> = rows.iter().map(link_with_clicks).collect();
    let next = (links.len() > query.limit).then(|| {
        links.truncate(query.limit);
        Position::of(&links[query.limit - 1])
    });
    Ok(Page { links, next })
}
