//! One row of a bulk import, from what a transport parsed ([`ImportInput`]) to what the link
//! service stores ([`ImportRow`]).
//!
//! A row is a create plus what a link brought from another shortener keeps: its legacy `code`,
//! stored exactly as spelled (even in the shape of a generated code, see the design notes on
//! imported codes), and its `created_at`. An expiry in the past is allowed: the link is
//! imported expired and its code stays taken.

use super::row_domain::RowDomain;
use super::tags::check_tags;
use super::{CreateRules, Error, ShortCode, TargetUrl, UrlError, echo};
use chrono::{DateTime, Datelike, Utc};
use codespace::shape::is_reserved;

/// How far in the future a `created_at` may be (clocks of two machines differ a little).
const CLOCK_SKEW: chrono::Duration = chrono::Duration::minutes(5);

/// An import row as a transport parsed it, not yet checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportInput {
    /// The target URL as given.
    pub url: String,
    /// A legacy code to keep.
    pub code: Option<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// Expiry.
    pub expires_at: Option<DateTime<Utc>>,
    /// When the other shortener made the link.
    pub created_at: Option<DateTime<Utc>>,
    /// A visit limit.
    pub max_visits: Option<u64>,
    /// Without a legacy code: an unguessable private code instead of a generated one.
    pub private: bool,
    /// Where the link routes besides its URL, as a create gives it.
    pub routes: RoutesInput,
    /// The host the row's link answered on where it was exported (`domain`), if it names one.
    pub domain: Option<String>,
    /// The host of the row's short URL (a `short_url` or Bitly `Bitlink` column), read when it
    /// names no `domain`: the link goes on the importer's tenant's domain of that host if it
    /// has claimed one, else on the default domain (`bit.ly` links come to this deployment's).
    pub short_host: Option<String>,
    /// What the shortener it was exported from said of the link.
    pub origin: Origin,
}

/// What an export says of a link where it comes from: an import makes active links only, so a
/// row whose link was not active there is refused ([`Origin::check`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// Its state (`disabled`, `deleted` and `used_up` are refused, in any case).
    pub state: Option<String>,
    /// Whether it was password protected.
    pub protected: bool,
    /// Its visits so far (refused at the row's `max_visits`).
    pub clicks: Option<u64>,
}

impl Origin {
    /// Notes a state cell: a state that refuses the row stays, whatever a later cell says.
    pub fn note_state(&mut self, state: &str) {
        if self
            .state
            .as_deref()
            .is_none_or(|s| refuse_unless_active(s).is_ok())
        {
            self.state = Some(state.to_string());
        }
    }

    /// Refuses a link that was disabled, deleted, used up (at `max_visits`) or password
    /// protected where it was exported.
    pub fn check(&self, max_visits: Option<u64>) -> Result<(), Error> {
        if let Some(state) = &self.state {
            refuse_unless_active(state)?;
        }
        refuse_protected(self.protected)?;
        refuse_used_up(max_visits, self.clicks)
    }
}

/// A link's routing as a create or an import row gives it, unchecked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutesInput {
    /// Redirect rules.
    pub rules: Vec<super::RuleInput>,
    /// The iOS target.
    pub ios: Option<String>,
    /// The Android target.
    pub android: Option<String>,
    /// A split.
    pub variants: Vec<super::VariantInput>,
    /// UTM parameters.
    pub utm: super::routes::Utm,
    /// Pass the short URL's query on.
    pub pass_query: bool,
    /// The social preview.
    pub preview: super::routes::Preview,
}

impl RoutesInput {
    /// The routing, checked against `rules`.
    pub fn checked(self, rules: &CreateRules) -> Result<super::Routes, Error> {
        Ok(super::Routes {
            utm: self.utm.checked()?,
            pass_query: self.pass_query,
            preview: self.preview.checked(rules)?,
            ..super::create::routes_of(self.rules, self.ios, self.android, self.variants, rules)?
        })
    }
}

/// A checked import row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportRow {
    /// The target.
    pub url: TargetUrl,
    /// The legacy code, if the row has one.
    pub code: Option<String>,
    /// Tags, sorted.
    pub tags: Vec<String>,
    /// Expiry (possibly past).
    pub expires_at: Option<DateTime<Utc>>,
    /// When the link was made.
    pub created_at: Option<DateTime<Utc>>,
    /// A visit limit.
    pub max_visits: Option<u64>,
    /// A private code instead of a generated one (for a row without a legacy code).
    pub private: bool,
    /// Where the link routes besides its URL.
    pub routes: super::Routes,
    /// The domain the row names, which the import checks is the importer's tenant's.
    pub domain: RowDomain,
}

impl ImportRow {
    /// About the bytes the row holds: its strings, and its routing as its JSON would be (a
    /// row rarely has any), so that a chunk of rows can be bounded by what it holds.
    pub fn weight(&self) -> usize {
        let routes = if self.routes == super::Routes::default() {
            0
        } else {
            serde_json::to_vec(&self.routes).map_or(0, |json| json.len())
        };
        std::mem::size_of::<Self>()
            + self.url.as_str().len()
            + self.code.as_ref().map_or(0, String::len)
            + self.tags.iter().map(|tag| tag.len() + 24).sum::<usize>()
            + self.domain.len()
            + routes
    }

    /// Checks `input` against `rules` as of `now`: the target follows every rule of a create;
    /// a legacy code is a code this node can serve (1 to 64 characters of `A-Za-z0-9_-`, of
    /// some code's shape), not a reserved word; times are before the year 10000, a creation
    /// not in the future and before the expiry.
    pub fn parse(
        input: ImportInput,
        rules: &CreateRules,
        now: DateTime<Utc>,
    ) -> Result<Self, Error> {
        input.origin.check(input.max_visits)?;
        let url = TargetUrl::parse(&input.url, rules.max_url_length, rules.targets.as_ref())
            .map_err(|e| match e {
                UrlError::Blocked(_) => Error::invalid("blocked_target", e.to_string()),
                e => Error::invalid("invalid_url", e.to_string()),
            })?;
        if let Some(code) = &input.code {
            check_legacy_code(code, rules.code_length)?;
            if input.private {
                return Err(Error::invalid(
                    "conflicting_options",
                    "a row with a code cannot also ask for a private one",
                ));
            }
        }
        for (field, time) in [
            ("expires_at", input.expires_at),
            ("created_at", input.created_at),
        ] {
            if time.is_some_and(|t| t.year() > 9999 || t.year() < 1970) {
                return Err(Error::invalid(
                    if field == "expires_at" {
                        "invalid_expiry"
                    } else {
                        "invalid_created_at"
                    },
                    format!("{field} must be between the years 1970 and 9999"),
                ));
            }
        }
        if let Some(created_at) = input.created_at {
            if created_at > now + CLOCK_SKEW {
                return Err(Error::invalid(
                    "invalid_created_at",
                    "created_at must not be in the future",
                ));
            }
            // Equal is a link imported already expired without a creation time of its own
            // (dated at its expiry), as this node's export writes it.
            if input.expires_at.is_some_and(|e| e < created_at) {
                return Err(Error::invalid(
                    "invalid_expiry",
                    "expires_at must not be before created_at",
                ));
            }
        }
        if let Some(max_visits) = input.max_visits {
            super::check_max_visits(max_visits)?;
        }
        Ok(Self {
            url,
            code: input.code,
            // Other shorteners' tags as Shlink stores them (`Summer Sale` is `summer-sale`).
            tags: check_tags(input.tags.iter().map(|t| super::peer_tag(t)).collect())?,
            expires_at: input.expires_at,
            created_at: input.created_at,
            max_visits: input.max_visits,
            private: input.private,
            routes: input.routes.checked(rules)?,
            domain: RowDomain::read(input.domain.as_deref(), input.short_host.as_deref(), rules),
        })
    }
}

/// Refuses a row whose link was disabled, deleted or used up where it was exported (`state`):
/// imported, it would redirect again (a link taken down included), where its code answered 410.
fn refuse_unless_active(state: &str) -> Result<(), Error> {
    match state.to_ascii_lowercase().as_str() {
        state @ ("disabled" | "deleted" | "used_up") => Err(Error::invalid(
            "not_active",
            format!("the link is {state} where it was exported; an import makes active links only"),
        )),
        _ => Ok(()),
    }
}

/// Refuses a row whose link had reached its visit limit where it was exported (`clicks` at
/// `max_visits`): it answered 410 there, and imported with no visits it would redirect again.
fn refuse_used_up(max_visits: Option<u64>, clicks: Option<u64>) -> Result<(), Error> {
    match (max_visits, clicks) {
        (Some(limit), Some(clicks)) if clicks >= limit => Err(Error::invalid(
            "not_active",
            format!(
                "the link had its {limit} visits where it was exported (max_visits); an import \
                 makes active links only"
            ),
        )),
        _ => Ok(()),
    }
}

/// Refuses a row whose link was password protected where it was exported (`protected`): its
/// password is not in the file, and imported without it the link would be open to anyone.
fn refuse_protected(protected: bool) -> Result<(), Error> {
    if protected {
        return Err(Error::invalid(
            "password_protected",
            "the link is password protected where it was exported and its password is not \
             exported; create it with a password instead",
        ));
    }
    Ok(())
}

/// Checks a legacy code: one the redirect edge and the API can name for base length `length`
/// (every code of `A-Za-z0-9_-` that is not an alias of a refused shape), at most 64
/// characters, not a reserved word (case-insensitively).
pub fn check_legacy_code(code: &str, length: usize) -> Result<(), Error> {
    let refused = |why: &str| Error::invalid("invalid_code", format!("code {} {why}", echo(code)));
    if code.is_empty() || code.len() > 64 {
        return Err(refused("must be 1 to 64 characters"));
    }
    if !code
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(refused("may hold only A-Z, a-z, 0-9, '-' and '_'"));
    }
    if is_reserved(code) {
        return Err(refused("is a reserved word"));
    }
    ShortCode::parse(code, length)
        .map(drop)
        .map_err(|_| refused("is not a shape this deployment serves"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_codes_keep_any_servable_shape_but_not_reserved_words() {
        for ok in [
            "aB3xY9z",
            "abc",
            "spring-sale",
            "x_1",
            "Z",
            "0123456789a",
            "aaaaaaaaaaaaaaaa",
        ] {
            check_legacy_code(ok, 7).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in [
            "",
            "a b",
            "caf\u{e9}",
            "a/b",
            "Metrics",
            "api",
            "healthz",
            "a.b",
            &"a-".repeat(33),
            "0123456789ab",
        ] {
            assert_eq!(
                check_legacy_code(bad, 7).expect_err(bad).code(),
                "invalid_code",
                "{bad:?}"
            );
        }
    }
}
