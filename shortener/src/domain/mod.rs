//! Domain types: what a link is and what can go wrong, free of any transport or store.

mod error;
mod link;
mod target;

pub use error::Error;
pub use link::{ClickCounts, CreateRequest, Link};
pub use target::{DEFAULT_MAX_URL_LENGTH, TargetUrl, UrlError};
