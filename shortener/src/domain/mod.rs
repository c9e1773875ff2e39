//! Domain types: what a link is, what a create asks for, which codes callers may name, and what
//! can go wrong; free of any transport or store.

mod branded;
mod caller;
mod code;
pub mod compact_code;
mod create;
mod error;
mod history;
mod host;
mod import;
mod link;
pub mod list;
mod password;
mod patch;
mod public;
pub mod routes;
mod row_domain;
pub mod rules;
mod scope;
pub mod stats;
mod tags;
mod target;
pub mod text;

pub use branded::{
    AppFile, Domain, DomainSettings, MAX_APP_FILE_BYTES, REDIRECT_STATUSES, Robots, patch_settings,
};
pub use caller::{Caller, Person};
pub use code::{ShortCode, echo, link_key, shown_code};
pub use compact_code::CompactCode;
pub use create::{CreateInput, CreateRequest, CreateRules, link_body_limit};
pub use error::{Error, MAX_MESSAGE, NoKey};
pub use history::{Event, EventKind, History, MAX_HISTORY_EVENTS};
pub use host::{MAX_HOST, MAX_LABEL, normalise_host, path_host};
pub use import::{ImportInput, ImportRow, Origin, RoutesInput, check_legacy_code};
pub use link::{ClickCounts, Link, LinkState, MAX_VISITS, check_max_visits, max_visits_of};
pub use list::{
    DomainFilter, HostFilter, ListInput, ListQuery, Page, Position, StateFilter, reverse_host,
};
pub use password::{MAX_PASSWORD, PasswordHash, check_password};
pub use patch::{LinkPatch, PasswordChange, PatchInput};
pub use public::{PublicBase, unscheme};
pub use routes::{Routes, Variant, VariantInput};
pub use row_domain::{RowDomain, both_domains, default_hosts, plain_host, without_port};
pub use rules::{Rule, RuleInput, Rules};
pub use scope::{Scope, Scopes, unknown_scope};
pub use stats::{
    Device, Granularity, Route, SeriesPoint, StatsInput, StatsQuery, StatsReport, StatsScope,
};
pub use tags::{MAX_TAGS, TagChange, check_tag, check_tags, peer_tag, stored_as as tag_stored_as};
#[cfg(test)]
pub(crate) use target::AnyHost;
pub use target::{DEFAULT_MAX_URL_LENGTH, TargetPolicy, TargetUrl, UrlError};
