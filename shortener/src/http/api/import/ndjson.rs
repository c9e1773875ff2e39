//! An NDJSON import row: the fields of a create (plus `code` and `created_at`), or a link
//! object as the API answers it and an NDJSON export writes it, so an export reads back in.
//! What an exported object says of the link where it was is read as a CSV export's columns
//! are (`super::rows`): a disabled, deleted, protected or used-up link is refused, not made
//! active again.

use super::rows::{code_of_short_url, host_of_short_url, import_time, utf8};
use crate::domain::Origin;
use crate::domain::{Error, ImportInput};
use crate::links::InputRow;
use serde::Deserialize;
use serde::de::IgnoredAny;

/// One NDJSON row: the fields of a create, plus `code` and `created_at`, or a link object as an
/// export writes it (the API's), whose other fields are read for what they refuse or ignored.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NdjsonRow {
    url: String,
    #[serde(default)]
    code: Option<String>,
    /// A create's alias: a code to keep, as `code` is.
    #[serde(default)]
    alias: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    expires_at: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    /// Any JSON number, so that a negative or fractional one is `invalid_max_visits`.
    max_visits: Option<serde_json::Number>,
    #[serde(default)]
    private: bool,
    /// Accepted for a create's sake; an import always finds the rows it made before.
    #[serde(default, rename = "dedup")]
    _dedup: bool,
    #[serde(default)]
    rules: Vec<crate::domain::RuleInput>,
    #[serde(default)]
    ios: Option<String>,
    #[serde(default)]
    android: Option<String>,
    #[serde(default)]
    variants: Vec<crate::domain::VariantInput>,
    #[serde(default)]
    utm_source: Option<String>,
    #[serde(default)]
    utm_medium: Option<String>,
    #[serde(default)]
    utm_campaign: Option<String>,
    #[serde(default)]
    utm_term: Option<String>,
    #[serde(default)]
    utm_content: Option<String>,
    #[serde(default)]
    pass_query: bool,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    image: Option<String>,
    /// The link's short URL where it was exported: its code, when `code` is absent.
    #[serde(default)]
    short_url: Option<String>,
    /// The link's state where it was exported: a disabled or deleted one is refused.
    #[serde(default)]
    state: Option<String>,
    /// Whether it was password protected where it was exported: such a row is refused.
    #[serde(default)]
    protected: bool,
    /// A password, as a create takes one: an import sets none, so such a row is refused (not
    /// answered as an unknown field, which would read as a malformed file).
    #[serde(default)]
    password: Option<IgnoredAny>,
    /// Its visits where it was exported: a row that had used up `max_visits` is refused.
    #[serde(default)]
    clicks: Option<Clicks>,
    /// The host the link answered on where it was exported: the importer's tenant's domain
    /// of that name, or the default domain for one of the node's own hosts (unless the
    /// import's `?domain=` puts every row on one domain).
    #[serde(default)]
    domain: Option<String>,
    /// Where the link was exported from, which the import does not keep: the tenant and key
    /// are the importer's, the times and counts new.
    #[serde(default, rename = "tenant")]
    _tenant: IgnoredAny,
    #[serde(default, rename = "owner")]
    _owner: IgnoredAny,
    #[serde(default, rename = "imported")]
    _imported: IgnoredAny,
    #[serde(default, rename = "deleted_at")]
    _deleted_at: IgnoredAny,
    #[serde(default, rename = "disabled_at")]
    _disabled_at: IgnoredAny,
}

/// An exported link's visits: the visitors' count is what `max_visits` counts.
#[derive(Debug, Deserialize)]
struct Clicks {
    #[serde(default)]
    human: u64,
}

/// One NDJSON row's fields; refused with the code it gives, where it gives one.
pub(super) fn ndjson_row(bytes: &[u8]) -> InputRow {
    let row = parsed(bytes).map_err(|error| (code_of(bytes), error))?;
    let code = row.code.clone().or_else(|| row.alias.clone());
    input_of(row).map_err(|error| (code, error))
}

/// The code (or alias) a row that is no import row gives, when it is a JSON object that gives
/// one as a string: its refusal is answered with it, as any other row's is.
fn code_of(bytes: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Named {
        #[serde(default)]
        code: Option<String>,
        #[serde(default)]
        alias: Option<String>,
    }
    let named: Named = serde_json::from_slice(bytes).ok()?;
    named.code.or(named.alias)
}

fn parsed(bytes: &[u8]) -> Result<NdjsonRow, Error> {
    serde_json::from_str(utf8(bytes)?).map_err(|e| {
        // An unknown field's error lists every known one; the field named is what helps.
        let text = e.to_string();
        let short = match text.split_once(", expected one of") {
            Some((head, _)) => head.to_string(),
            None => text,
        };
        Error::bad_request("invalid_json", format!("invalid row: {short}"))
    })
}

fn input_of(row: NdjsonRow) -> Result<ImportInput, Error> {
    if row.password.is_some() {
        return Err(Error::invalid(
            "password_protected",
            "password: an import sets no passwords; create a protected link with \
             POST /api/v1/links and its password",
        ));
    }
    let code = match (row.code, row.alias) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid(
                "conflicting_options",
                "give code or alias, not both",
            ));
        }
        (code, alias) => code.or(alias),
    };
    let origin = Origin {
        state: row.state,
        protected: row.protected,
        clicks: row.clicks.map(|c| c.human),
    };
    // Only a row without a `domain` field: an empty one is the default domain.
    let short_host = match row.domain {
        None => row.short_url.as_deref().and_then(host_of_short_url),
        Some(_) => None,
    };
    let code = match (code, row.short_url) {
        (None, Some(short)) => Some(code_of_short_url(&short)?),
        (code, _) => code,
    };
    Ok(ImportInput {
        url: row.url,
        code,
        tags: row.tags,
        expires_at: row
            .expires_at
            .as_deref()
            .map(|t| import_time("expires_at", "invalid_expiry", t))
            .transpose()?,
        created_at: row
            .created_at
            .as_deref()
            .map(|t| import_time("created_at", "invalid_created_at", t))
            .transpose()?,
        max_visits: row
            .max_visits
            .as_ref()
            .map(crate::domain::max_visits_of)
            .transpose()?,
        private: row.private,
        routes: crate::domain::RoutesInput {
            rules: row.rules,
            ios: row.ios,
            android: row.android,
            variants: row.variants,
            utm: crate::domain::routes::Utm {
                source: row.utm_source,
                medium: row.utm_medium,
                campaign: row.utm_campaign,
                term: row.utm_term,
                content: row.utm_content,
            },
            pass_query: row.pass_query,
            preview: crate::domain::routes::Preview {
                title: row.title,
                description: row.description,
                image: row.image,
            },
        },
        domain: row.domain,
        short_host,
        origin,
    })
}
