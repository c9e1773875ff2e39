//! Which browser origins may call the compat dialects across origins
//! (`SHORTENER_COMPAT_CORS_ORIGINS`).

/// The origins whose pages may call the compat dialects (`/rest/`, `/yourls-api.php`, `/v4/`)
/// from a browser. Their clients send the API key in a header or the query, never in a cookie,
/// so an answer to another origin carries no credential that origin did not send itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CorsOrigins {
    /// Any origin (`*`), the default.
    #[default]
    Any,
    /// These exact origins (`scheme://host[:port]`), as browsers send them in `Origin`.
    Listed(Vec<String>),
    /// No cross-origin calls: the dialects answer no preflight and send no CORS headers.
    None,
}

impl CorsOrigins {
    /// The origins `items` names: `*`, `none`, or exact origins; blanks are ignored, and no
    /// item at all is `*`. An item that is not an origin as a browser writes it (a path, a
    /// trailing slash, upper case, a default port, a wildcard inside a name) is refused with
    /// the origin it may have meant.
    pub fn parse<S: AsRef<str>>(items: &[S]) -> Result<Self, String> {
        let items: Vec<&str> = items
            .iter()
            .map(|i| i.as_ref().trim())
            .filter(|i| !i.is_empty())
            .collect();
        match items.as_slice() {
            [] | ["*"] => return Ok(CorsOrigins::Any),
            [one] if one.eq_ignore_ascii_case("none") => return Ok(CorsOrigins::None),
            _ => {}
        }
        let mut listed = Vec::with_capacity(items.len());
        for item in items {
            if item == "*" || item.eq_ignore_ascii_case("none") {
                return Err(format!(
                    "{item} stands alone: write *, none, or a list of origins"
                ));
            }
            let origin = check_origin(item)?;
            if !listed.contains(&origin) {
                listed.push(origin);
            }
        }
        Ok(CorsOrigins::Listed(listed))
    }

    /// Whether a page of `origin` (a request's `Origin` value) may call the dialects.
    pub fn allows(&self, origin: &str) -> bool {
        match self {
            CorsOrigins::Any => true,
            CorsOrigins::Listed(origins) => origins.iter().any(|o| o == origin),
            CorsOrigins::None => false,
        }
    }
}

/// `text` if it is an origin exactly as a browser sends it in `Origin`.
fn check_origin(text: &str) -> Result<String, String> {
    let shown = crate::domain::echo(text);
    let url = url::Url::parse(text).map_err(|_| {
        format!("{shown} is not an origin: write scheme://host[:port], e.g. https://app.example")
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(format!(
            "{shown} is not an origin: only http and https origins with a host make requests"
        ));
    }
    if let Some(url::Host::Domain(name)) = url.host()
        && !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    {
        return Err(format!(
            "{shown} is not an origin: a host name holds only letters, digits, - and . (no \
             wildcards: list each origin)"
        ));
    }
    let origin = url.origin().ascii_serialization();
    if origin != text {
        return Err(format!(
            "{shown} is not an origin as browsers send it (scheme://host[:port], lower case, no \
             default port, path, query or trailing slash): write {origin}"
        ));
    }
    Ok(origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_none_and_exact_origins_are_read() {
        assert_eq!(CorsOrigins::parse::<&str>(&[]), Ok(CorsOrigins::Any));
        assert_eq!(CorsOrigins::parse(&[" * "]), Ok(CorsOrigins::Any));
        assert_eq!(CorsOrigins::parse(&["NONE"]), Ok(CorsOrigins::None));
        let listed = CorsOrigins::parse(&["https://app.example", " http://127.0.0.1:8081", ""])
            .expect("origins");
        assert!(listed.allows("https://app.example") && listed.allows("http://127.0.0.1:8081"));
        assert!(!listed.allows("https://app.example:443") && !listed.allows("null"));
        assert!(CorsOrigins::Any.allows("null") && !CorsOrigins::None.allows("https://a.b"));
    }

    #[test]
    fn what_is_not_an_origin_is_refused_with_what_was_meant() {
        for (bad, says) in [
            ("https://app.example/", "write https://app.example"),
            ("https://app.example/path", "write https://app.example"),
            ("https://APP.example", "write https://app.example"),
            ("https://app.example:443", "write https://app.example"),
            ("https://u:p@app.example", "write https://app.example"),
            ("app.example", "not an origin"),
            ("ftp://app.example", "only http and https"),
            ("https://*.example", "not an origin"),
            ("file:///tmp/x", "only http and https"),
        ] {
            let error = CorsOrigins::parse(&[bad]).expect_err(bad);
            assert!(error.contains(says), "{bad}: {error}");
        }
        for mixed in [["*", "https://a.example"], ["none", "https://a.example"]] {
            assert!(CorsOrigins::parse(&mixed).is_err(), "{mixed:?}");
        }
    }
}
