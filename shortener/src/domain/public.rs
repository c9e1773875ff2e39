//! The public base URL short links are shown under.

/// The base every short URL starts with: an absolute http(s) URL ending with `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicBase(String);

impl PublicBase {
    /// `base` with a trailing `/` added if it has none.
    pub fn new(base: &str) -> Self {
        if base.ends_with('/') {
            Self(base.to_string())
        } else {
            Self(format!("{base}/"))
        }
    }

    /// The full short URL of `code`.
    pub fn short_url(&self, code: &str) -> String {
        format!("{}{code}", self.0)
    }

    /// The host of the base URL, if it has one (refused as a link target).
    pub fn host(&self) -> Option<String> {
        url::Url::parse(&self.0)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
    }

    /// The base URL.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}
