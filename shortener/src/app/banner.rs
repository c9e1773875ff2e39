//! What a node tells the operator at every start: where it answers, where the console is, where
//! its API keys come from and, for a key it made itself, what the key may do and how to make an
//! admin one, and a `curl` that creates a link.

use super::node::Node;
use super::resources::API_KEYS_FILE;
use crate::config::Config;
use std::net::{IpAddr, SocketAddr};

/// The lines printed after the node started serving, its public listener on `http`.
pub(super) fn banner(node: &Node, config: &Config, http: SocketAddr) -> String {
    let public = node.public.as_str();
    // Where to reach this node: its public URL when that plainly names this listener, else the
    // listener itself. A host name may lead here or to a load balancer, which only the network
    // can tell; the first `curl` (with the API key in it) goes to the listener either way, never
    // to a host that may be someone else's.
    let lead = leads_here(public, http);
    let here = if lead == Some(true) {
        public.to_string()
    } else {
        local_base(http)
    };
    let mut lines = vec![match lead {
        Some(true) => format!("answering at {public}"),
        Some(false) => format!(
            "answering at {here}; links are made under {public}, which must lead here (a load \
             balancer or proxy in front)"
        ),
        None => format!(
            "answering at {here}; links are made under {public} (its name must lead here, \
             through DNS or a load balancer)"
        ),
    }];
    if node.console {
        let key = if node.default_api_key.is_some() {
            "the API key"
        } else {
            "an API key"
        };
        let how = if config.access.oidc_issuer.is_some() {
            format!("sign in with the identity provider or {key}")
        } else {
            format!("sign in with {key}")
        };
        lines.push(format!("  console:  {here}console/ ({how})"));
    }
    let key_header = match (&node.default_api_key, &config.access.api_keys_file) {
        (Some(key), _) => {
            let path = key.path.display();
            let dir = key
                .path
                .parent()
                .map_or(".".into(), |d| d.display().to_string());
            let made = if key.made_now {
                "made just now"
            } else {
                "made on the first start"
            };
            lines.push(format!(
                "  API key:  first line of {path} ({made}); it may create, read, change and \
                 delete links and read stats, but not administer."
            ));
            lines.push(format!(
                "            An admin key: {} keys add --file {dir}/keys.toml --tenant default \
                 --name admin --scopes admin,",
                program()
            ));
            lines.push(format!(
                "            then start with SHORTENER_API_KEYS_FILE={dir}/keys.toml (add a key \
                 without admin there for scripts too: {path} is not read then)."
            ));
            format!("$(head -1 {path})")
        }
        (None, file) => {
            let mut sources = Vec::new();
            if let Some(file) = file {
                sources.push(format!(
                    "{} (read again whenever it changes)",
                    file.display()
                ));
            }
            if !config.access.api_keys.is_empty() {
                sources.push("SHORTENER_API_KEYS".into());
            }
            lines.push(if sources.is_empty() {
                "  API keys: only those made through the API (no SHORTENER_API_KEYS or keys file)"
                    .into()
            } else {
                format!("  API keys: read from {}", sources.join(" and "))
            });
            let made = config.store.data_dir.join(API_KEYS_FILE);
            if config.store.database_url.is_none()
                && made.exists()
                && file.as_ref().is_none_or(|file| made != *file)
            {
                lines.push(format!(
                    "            {} (the key made on the first start) is not read while \
                     these are set",
                    made.display()
                ));
            }
            "$KEY".into()
        }
    };
    lines.push(format!(
        "  try:      curl -i -H \"Authorization: Bearer {key_header}\" -H 'Content-Type: \
         application/json' -d '{{\"url\":\"https://example.com/\"}}' {here}api/v1/links"
    ));
    lines.join("\n")
}

/// Whether `public` (a URL ending in `/`) names the listener on `http` itself: `Some(true)`
/// for its port at its address (or, for a listener on every address, a loopback one),
/// `Some(false)` for an address or port that is not it, `None` for a host name, which only
/// the network can tell (a name of this machine, or of a load balancer).
fn leads_here(public: &str, http: SocketAddr) -> Option<bool> {
    let url = url::Url::parse(public).ok()?;
    let ips: Vec<IpAddr> = match url.host()? {
        url::Host::Ipv4(v4) => vec![IpAddr::V4(v4)],
        url::Host::Ipv6(v6) => vec![IpAddr::V6(v6)],
        url::Host::Domain("localhost") => vec![
            IpAddr::from([127, 0, 0, 1]),
            IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        ],
        url::Host::Domain(_) => return None,
    };
    let listener = http.ip();
    let at_address = ips.iter().any(|ip| {
        *ip == listener
            || (listener.is_unspecified() && ip.is_loopback() && ip.is_ipv4() == listener.is_ipv4())
    });
    Some(url.port_or_known_default() == Some(http.port()) && at_address)
}

/// The base URL of the listener on `http`, reachable from this machine (a listener on every
/// address by its loopback one).
fn local_base(http: SocketAddr) -> String {
    let ip = match http.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::from([127, 0, 0, 1]),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}/", SocketAddr::new(ip, http.port()))
}

/// How to run this binary again from a shell: its name when its directory is on `PATH`, its
/// full path otherwise (a binary built by `cargo run` is not on it).
fn program() -> String {
    let Ok(exe) = std::env::current_exe() else {
        return "shortener".into();
    };
    let on_path = exe.parent().is_some_and(|dir| {
        std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| d == dir))
    });
    match exe.file_name() {
        Some(name) if on_path => name.to_string_lossy().into_owned(),
        _ => exe.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_url_leads_here_only_when_it_is_this_listener() {
        let at = |s: &str| s.parse::<SocketAddr>().expect("addr");
        for (public, http, here) in [
            ("http://127.0.0.1:8080/", "127.0.0.1:8080", Some(true)),
            ("http://localhost:8080/", "0.0.0.0:8080", Some(true)),
            ("http://localhost:8080/", "[::1]:8080", Some(true)),
            ("http://127.0.0.1:8080/", "0.0.0.0:8080", Some(true)),
            ("http://[::1]:8080/", "0.0.0.0:8080", Some(false)),
            ("http://127.0.0.1:8080/", "127.0.0.1:28081", Some(false)),
            ("https://sho.rt/", "0.0.0.0:8080", None),
            ("http://myhost:8080/", "0.0.0.0:8080", None),
        ] {
            assert_eq!(leads_here(public, at(http)), here, "{public} {http}");
        }
        assert_eq!(local_base(at("0.0.0.0:8080")), "http://127.0.0.1:8080/");
        assert_eq!(local_base(at("[::]:8080")), "http://[::1]:8080/");
        assert_eq!(local_base(at("10.0.0.5:80")), "http://10.0.0.5:80/");
    }
}
