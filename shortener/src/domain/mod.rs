//! Domain types: what a link is, what a create asks for, which codes callers may name, and what
//! can go wrong; free of any transport or store.

mod caller;
mod code;
pub mod compact_code;
mod create;
mod error;
mod link;
mod public;
mod scope;
mod target;
pub mod text;

pub use caller::Caller;
pub use code::{ShortCode, echo};
pub use compact_code::CompactCode;
pub use create::{CreateInput, CreateRequest, CreateRules};
pub use error::Error;
pub use link::{ClickCounts, Link};
pub use public::PublicBase;
pub use scope::{Scope, Scopes, unknown_scope};
pub use target::{DEFAULT_MAX_URL_LENGTH, TargetPolicy, TargetUrl, UrlError};
