//! The public base URL short links are shown under, and the short URL of a link on a branded
//! domain.

/// The base every short URL of the default domain starts with: an absolute http(s) URL ending
/// with `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicBase {
    base: String,
    host: Option<String>,
    https: bool,
}

impl PublicBase {
    /// `base` with a trailing `/` added if it has none, written as a URL parser writes it:
    /// the host in lower case, the scheme's default port left out (`https://SHO.RT:443/` is
    /// `https://sho.rt/`), so short URLs are spelled the way links answer their `domain`.
    pub fn new(base: &str) -> Self {
        let base = if base.ends_with('/') {
            base.to_string()
        } else {
            format!("{base}/")
        };
        let parsed = url::Url::parse(&base).ok();
        let base = match &parsed {
            Some(url) if url.query().is_none() && url.fragment().is_none() => url.to_string(),
            _ => base,
        };
        Self {
            host: parsed
                .as_ref()
                .and_then(|u| u.host_str().map(str::to_string)),
            https: parsed.is_none_or(|u| u.scheme() != "http"),
            base,
        }
    }

    /// The full short URL of `code` on the default domain.
    pub fn short_url(&self, code: &str) -> String {
        format!("{}{code}", self.base)
    }

    /// The full short URL of `link`: on its branded domain (under the scheme of the public
    /// URL), else on the default domain.
    pub fn link_url(&self, link: &super::Link) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = self.write_link_url(&mut out, link.domain.as_deref(), link.shown_code());
        out
    }

    /// Writes the short URL of `code` on `domain` (`None`: the default domain) to `out`.
    pub fn write_link_url(
        &self,
        out: &mut impl std::fmt::Write,
        domain: Option<&str>,
        code: &str,
    ) -> std::fmt::Result {
        match domain {
            None => out.write_str(&self.base)?,
            Some(host) => {
                out.write_str(if self.https { "https://" } else { "http://" })?;
                out.write_str(host)?;
                out.write_char('/')?;
            }
        }
        out.write_str(code)
    }

    /// The host of the base URL, if it has one (refused as a link target).
    pub fn host(&self) -> Option<String> {
        self.host.clone()
    }

    /// Whether short URLs are shown under https (the public URL's scheme is not `http`).
    pub fn https(&self) -> bool {
        self.https
    }

    /// The host of the base URL, the default domain's name in answers (empty without one).
    pub fn host_str(&self) -> &str {
        self.host.as_deref().unwrap_or("")
    }

    /// The base URL.
    pub fn as_str(&self) -> &str {
        &self.base
    }

    /// The code `text` names when it is a short URL on the default domain, with its scheme
    /// (either one) or without (`example.net/s/abc`, as Bitly ids are): what follows the base,
    /// its path included.
    pub fn code_in<'a>(&self, text: &'a str) -> Option<&'a str> {
        unscheme(text).strip_prefix(unscheme(&self.base))
    }
}

/// `text` without a leading `https://` or `http://`.
pub fn unscheme(text: &str) -> &str {
    text.strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
        .unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::PublicBase;

    #[test]
    fn the_base_is_written_as_links_answer_their_domain() {
        for (given, base, host) in [
            ("https://sho.rt/", "https://sho.rt/", "sho.rt"),
            ("https://SHO.RT:443/", "https://sho.rt/", "sho.rt"),
            ("http://Sho.Rt:80", "http://sho.rt/", "sho.rt"),
            ("https://sho.rt:8443/s", "https://sho.rt:8443/s/", "sho.rt"),
            (
                "http://127.0.0.1:8080",
                "http://127.0.0.1:8080/",
                "127.0.0.1",
            ),
        ] {
            let public = PublicBase::new(given);
            assert_eq!(
                (public.as_str(), public.host_str()),
                (base, host),
                "{given}"
            );
            assert_eq!(public.short_url("abc"), format!("{base}abc"));
        }
    }
}
