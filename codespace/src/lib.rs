//! The short-code space: everything about codes that needs no I/O and no async.
//!
//! An ID (a `u64` handed out from a leased [`Block`]) becomes a short code in two steps:
//! [`CodeSpace::encode`] permutes the ID with NIST FF1 (AES-256, radix 62) under a secret
//! [`CodeKey`], then writes the result as fixed-length base62 (`0-9A-Za-z`). IDs below `62^L`
//! give codes of exactly `L` characters; larger IDs continue in the disjoint space of length
//! `L + 1` (and so on), never wrapping. [`CodeSpace::decode`] reverses both steps, which is how an
//! operator maps a code back to its ID and, through the lease ledger, to the node that made it.
//!
//! [`shape`] says which strings can be generated codes, private codes or custom aliases; the
//! three namespaces are disjoint by construction, so an alias can never shadow a generated code.
//!
//! Modules: `space` ([`CodeSpace`]: encode and decode), `ff1` (FF1 as the code space uses it),
//! `numeral` (tests only: the same strings as `fpe`'s numeral string, to hold `ff1` to `fpe`
//! and NIST's samples), `base62` (the alphabet and fixed-width digits), `key` ([`CodeKey`]: parsing,
//! generation, fingerprints), `block` ([`Block`]: a leased half-open range), [`shape`].

mod base62;
mod block;
mod ff1;
mod key;
#[cfg(test)]
mod numeral;
pub mod shape;
mod space;

pub use base62::{ALPHABET, digit_value};
pub use block::Block;
pub use key::{CodeKey, KeyError};
pub use space::{CodeError, CodeSpace, DEFAULT_LENGTH, MAX_GENERATED_LENGTH, MIN_LENGTH, pow62};
