//! The redirect service: where a code goes.
//!
//! The [`Resolver`] answers from the [`LinkCache`] when it can and reads the store when it must
//! (caching what it read); a path that cannot be a code is answered without either. The HTTP
//! redirect edge (`http::redirect`) only turns a [`Resolution`] into a response, so this is the
//! one part of the redirect path that reads the store. The cache lives here with the resolver
//! that fills it; the link service tells it of every change this node makes
//! ([`crate::links::LinkChanges`]) and the change feed of every change other nodes make.
//!
//! A generated code that decodes above every ID a stored code decodes to is answered "not
//! found" without the store ([`HighWaterReads`] for a store other nodes write too; docs/design.md,
//! I9).

mod cache;
mod changes;
mod entry;
mod high_water;
mod negative;
mod places;
mod resolver;
mod weigh;

pub use cache::{Answer, CacheConfig, Cached, LinkCache, NewLink, Ticket, VisitLimit};
pub use entry::{Entry, Kind, Rare};
pub use places::Place;
pub mod routing;
pub use high_water::{HighWaterReads, Read};
pub use resolver::{Key, LookupCounters, Resolution, Resolver, Target};
