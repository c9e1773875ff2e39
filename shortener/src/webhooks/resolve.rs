//! Name resolution for deliveries. A webhook URL's host name is resolved at each delivery,
//! not only checked when it was registered, and only public addresses are kept: a public name
//! pointed at a loopback, private, link-local or metadata address afterwards (DNS rebinding)
//! reaches nothing inside. Used unless the operator allows private endpoints.

use crate::targets::is_not_public;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::SocketAddr;

/// The system resolver, keeping only public addresses; a name with none is an error (the
/// delivery counts as unreachable and is retried like any other failure).
#[derive(Debug, Default, Clone, Copy)]
pub struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public = public(found);
            if public.is_empty() {
                return Err(format!("{host} resolves to no public address").into());
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// The public addresses among `found`.
fn public(found: Vec<SocketAddr>) -> Vec<SocketAddr> {
    found
        .into_iter()
        .filter(|a| !is_not_public(a.ip().to_canonical()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn only_public_addresses_are_kept() {
        let addr = |s: &str| SocketAddr::from_str(s).expect("addr");
        let found = vec![
            addr("127.0.0.1:0"),
            addr("10.1.2.3:0"),
            addr("169.254.169.254:0"),
            addr("[::1]:0"),
            addr("[fd00::1]:0"),
            addr("[::ffff:192.168.0.1]:0"),
            addr("93.184.215.14:0"),
            addr("[2606:4700::1]:0"),
        ];
        assert_eq!(
            public(found),
            vec![addr("93.184.215.14:0"), addr("[2606:4700::1]:0")]
        );
    }

    #[tokio::test]
    async fn a_name_that_resolves_only_to_loopback_is_refused() {
        let name = Name::from_str("localhost").expect("name");
        let resolved = PublicOnly.resolve(name).await;
        let error = resolved.err().expect("refused").to_string();
        assert!(error.contains("no public address"), "{error}");
    }
}
