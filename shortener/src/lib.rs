//! A URL shortener node.
//!
//! Placeholder for the node's library; see the modules.

pub mod cli;
pub mod codes_cli;
pub mod keys;
