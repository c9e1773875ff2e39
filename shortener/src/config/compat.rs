//! Settings of one part of the node (`Compatibility` in `--help`): which other shorteners' APIs
//! the node also speaks.

use super::{ConfigError, CorsOrigins};
use clap::Args;

/// Another shortener's API the node may speak besides its own (see docs/compat.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// YOURLS's `/yourls-api.php`.
    Yourls,
    /// Shlink's REST API under `/rest`.
    Shlink,
    /// Bitly's API under `/v4`.
    Bitly,
}

impl Dialect {
    /// Every dialect, in the order the docs list them.
    pub const ALL: [Dialect; 3] = [Dialect::Yourls, Dialect::Shlink, Dialect::Bitly];

    /// The dialect's name in `SHORTENER_COMPAT` and its metric label.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Yourls => "yourls",
            Dialect::Shlink => "shlink",
            Dialect::Bitly => "bitly",
        }
    }

    /// Whether this node serves the dialect yet (one that is not is refused at start rather
    /// than accepted and left silent).
    pub fn served(self) -> bool {
        matches!(self, Dialect::Yourls | Dialect::Shlink | Dialect::Bitly)
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// The dialects a node speaks: none unless enabled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dialects(u8);

impl Dialects {
    /// The dialects named in `names` (each `yourls`, `shlink` or `bitly`, any case, blanks
    /// ignored); an unknown name is an error that lists the known ones, and a dialect not
    /// served yet an error that says so.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        let mut set = Dialects::default();
        for name in names.iter().map(|n| n.as_ref().trim()) {
            if name.is_empty() {
                continue;
            }
            let dialect = Dialect::ALL
                .into_iter()
                .find(|d| d.name().eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    format!(
                        "{} is not a dialect; the dialects are yourls, shlink and bitly",
                        crate::domain::echo(name)
                    )
                })?;
            if !dialect.served() {
                return Err(format!(
                    "{} is not served by this version yet (served: yourls, shlink, bitly)",
                    dialect.name()
                ));
            }
            set = set.with(dialect);
        }
        Ok(set)
    }

    /// `self` and `dialect`.
    pub fn with(self, dialect: Dialect) -> Self {
        Dialects(self.0 | dialect.bit())
    }

    /// Whether the node speaks `dialect`.
    pub fn speaks(self, dialect: Dialect) -> bool {
        self.0 & dialect.bit() != 0
    }
}

/// Which other shorteners' APIs the node speaks.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Compatibility")]
pub struct CompatConfig {
    /// Other shorteners' APIs to speak besides our own, comma-separated: `yourls`
    /// (`/yourls-api.php`), `shlink` (`/rest/...`), `bitly` (`/v4/...`). None by default; a
    /// dialect not named answers its paths 404 like any unknown code (docs/compat.md).
    #[arg(long, env = "SHORTENER_COMPAT", value_delimiter = ',')]
    pub compat: Vec<String>,
    /// Which browser origins may call the dialects' paths from their pages (CORS): `*` (any,
    /// the default), `none`, or comma-separated exact origins such as
    /// `https://app.shlink.io,http://localhost:3000`. The console and the JSON API never
    /// answer other origins (docs/compat.md, "Browsers and CORS").
    #[arg(
        long,
        env = "SHORTENER_COMPAT_CORS_ORIGINS",
        value_delimiter = ',',
        default_value = "*"
    )]
    pub compat_cors_origins: Vec<String>,
}

impl CompatConfig {
    /// Checks what this section alone can tell; the error names the setting.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        self.dialects()?;
        self.cors_origins().map(|_| ())
    }

    /// The origins that may call the dialects from a browser.
    pub fn cors_origins(&self) -> Result<CorsOrigins, ConfigError> {
        CorsOrigins::parse(&self.compat_cors_origins).map_err(|e| {
            ConfigError::new(
                "SHORTENER_COMPAT_CORS_ORIGINS",
                format!("SHORTENER_COMPAT_CORS_ORIGINS: {e}"),
            )
        })
    }

    /// The dialects the node speaks.
    pub fn dialects(&self) -> Result<Dialects, ConfigError> {
        Dialects::parse(&self.compat)
            .map_err(|e| ConfigError::new("SHORTENER_COMPAT", format!("SHORTENER_COMPAT: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_any_case_and_blanks_are_read_and_unknown_names_refused() {
        let set = Dialects::parse(&["YOURLS", " yourls", ""]).expect("known names");
        assert!(set.speaks(Dialect::Yourls));
        assert!(!set.speaks(Dialect::Shlink) && !set.speaks(Dialect::Bitly));
        let set = Dialects::parse(&["yourls", "Shlink", "Bitly"]).expect("served names");
        assert!(
            set.speaks(Dialect::Yourls)
                && set.speaks(Dialect::Shlink)
                && set.speaks(Dialect::Bitly)
        );
        assert_eq!(Dialects::parse::<&str>(&[]), Ok(Dialects::default()));
        let error = Dialects::parse(&["yourls", "polr"]).expect_err("unknown name");
        assert!(error.contains("\"polr\"") && error.contains("yourls, shlink and bitly"));
    }
}
