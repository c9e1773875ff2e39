//! The digests a create is recognised by: its idempotency fingerprint and its dedup key.

use crate::domain::CreateRequest;
use sha2::{Digest, Sha256};

/// SHA-256 over NUL-separated fields, under a domain tag.
fn digest(tag: &[u8], fields: &[&[u8]]) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(tag);
    for field in fields {
        h.update([0]);
        h.update(field);
    }
    h.finalize().to_vec()
}

fn expiry_bytes(request: &CreateRequest) -> [u8; 8] {
    request
        .expires_at
        .map_or(i64::MIN, |t| t.timestamp_millis())
        .to_be_bytes()
}

/// The digest that tells a true retry (same request) from a reused idempotency key: every
/// field of the request, its password only as whether it has one (a digest of a password would
/// be a verifier cheaper to attack than its Argon2 hash; a retry's password is checked against
/// the link's hash instead, [`super::LinkService`]). A create with neither routing nor a
/// password digests as it did before routing existed, and one on the default domain as before
/// domains existed, so a retry across an upgrade is still recognised.
pub(super) fn fingerprint(request: &CreateRequest) -> Vec<u8> {
    let flags = [u8::from(request.dedup), u8::from(request.private)];
    let alias = request.alias.as_deref().unwrap_or("");
    let tags = request.tags.join(",");
    let max_visits = request.max_visits.unwrap_or(0).to_be_bytes();
    let expiry = expiry_bytes(request);
    let mut fields: Vec<&[u8]> = vec![
        request.url.as_str().as_bytes(),
        alias.as_bytes(),
        &expiry,
        &flags,
        tags.as_bytes(),
        &max_visits,
    ];
    if let Some(host) = &request.domain {
        fields.push(host.as_bytes());
    }
    let protected = [u8::from(request.password.is_some())];
    let routes = (request.password.is_some() || request.routes != Default::default())
        .then(|| serde_json::to_vec(&request.routes).unwrap_or_default());
    if let Some(routes) = &routes {
        fields.push(&protected);
        fields.push(routes);
    }
    let tag: &[u8] = match (request.domain.is_some(), routes.is_some()) {
        (false, false) => b"create v2",
        (true, false) => b"create v3",
        (false, true) => b"create v4",
        (true, true) => b"create v5",
    };
    digest(tag, &fields)
}

/// The dedup key: one live generated link per (tenant, URL, expiry) on the default domain, and
/// per (tenant, domain, URL, expiry) on a branded one (the default domain's keys are those of
/// before domains, so dedup creates keep finding the links made before). With
/// [`CreateRequest::dedup_settings`] (Shlink's `findIfExists`, which matches them too) the
/// key names the tags and the visit limit as well, when the create sets either: such a create
/// is never answered a link whose tags or limit differ from those it asks for, and one that
/// sets neither finds the links of the JSON API's `dedup` and is found by it. A link's
/// routing and preview are left out, as Shlink leaves them.
pub(super) fn dedup_key(tenant: &str, request: &CreateRequest) -> Vec<u8> {
    let base = [
        tenant.as_bytes(),
        request.url.as_str().as_bytes(),
        &expiry_bytes(request),
    ];
    if !request.dedup_settings || (request.tags.is_empty() && request.max_visits.is_none()) {
        return match &request.domain {
            None => digest(b"dedup v2", &base),
            Some(host) => digest(b"dedup v3", &[base[0], base[1], base[2], host.as_bytes()]),
        };
    }
    // Tags are sorted and without duplicates (and hold no `,`); an absent domain or limit is an
    // empty field, which neither is when present.
    let tags = request.tags.join(",");
    let max_visits = request.max_visits.map(u64::to_be_bytes);
    let fields = [
        base[0],
        base[1],
        base[2],
        request.domain.as_deref().unwrap_or("").as_bytes(),
        tags.as_bytes(),
        max_visits.as_ref().map_or(&[][..], |m| &m[..]),
    ];
    digest(b"dedup v4", &fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{AnyHost, CreateInput, CreateRules};
    use std::sync::Arc;

    fn request(change: impl FnOnce(&mut CreateInput)) -> CreateRequest {
        let mut input = CreateInput {
            url: "https://example.com/a".into(),
            ..CreateInput::default()
        };
        change(&mut input);
        let rules = CreateRules {
            max_url_length: 2048,
            targets: Arc::new(AnyHost),
            code_length: 7,
            own_hosts: Arc::from([]),
            countries: true,
        };
        CreateRequest::parse(input, &rules, chrono::Utc::now()).expect("valid")
    }

    #[test]
    fn every_field_of_a_create_moves_its_fingerprint() {
        let plain = fingerprint(&request(|_| {}));
        type Change = (&'static str, fn(&mut CreateInput));
        let changes: [Change; 11] = [
            ("url", |i| i.url = "https://example.com/b".into()),
            ("alias", |i| i.alias = Some("spring".into())),
            ("tags", |i| i.tags = vec!["x".into()]),
            ("max_visits", |i| i.max_visits = Some(3)),
            ("dedup", |i| i.dedup = true),
            ("password", |i| i.password = Some("secret-one".into())),
            ("ios", |i| {
                i.ios = Some("https://apps.apple.com/app/id1".into())
            }),
            ("android", |i| {
                i.android = Some("https://play.google.com/x".into())
            }),
            ("utm", |i| i.utm.source = Some("news".into())),
            ("pass_query", |i| i.pass_query = true),
            ("preview", |i| i.preview.title = Some("A title".into())),
        ];
        let mut seen = std::collections::HashSet::from([plain.clone()]);
        for (field, change) in changes {
            let digest = fingerprint(&request(change));
            assert!(
                seen.insert(digest),
                "{field} left the fingerprint as another's"
            );
        }
        // The same request twice digests the same, and a password's value is not in it.
        assert_eq!(fingerprint(&request(|_| {})), plain);
        assert_eq!(
            fingerprint(&request(|i| i.password = Some("secret-one".into()))),
            fingerprint(&request(|i| i.password = Some("secret-two".into())))
        );
    }

    /// Asked for (Shlink's `findIfExists`), a dedup key tells apart creates whose links would
    /// differ in tags or visit limit, not in routing or preview, and keeps the key of before
    /// those counted for a create that sets neither (links made then are still found); not
    /// asked for (the JSON API's `dedup`, Bitly's shorten), it names none of them.
    #[test]
    fn a_dedup_key_names_the_settings_a_link_would_differ_in_when_asked() {
        let plain_api = |change: fn(&mut CreateInput)| dedup_key("t", &request(change));
        assert_eq!(
            plain_api(|i| i.tags = vec!["x".into()]),
            plain_api(|i| i.max_visits = Some(3))
        );
        let key = |change: fn(&mut CreateInput)| {
            dedup_key(
                "t",
                &request(|i| {
                    i.dedup_settings = true;
                    change(i);
                }),
            )
        };
        let plain = key(|_| {});
        let before = digest(
            b"dedup v2",
            &[b"t", b"https://example.com/a", &i64::MIN.to_be_bytes()],
        );
        assert_eq!(plain, before, "a plain create keeps its key");
        type Change = (&'static str, fn(&mut CreateInput));
        let changes: [Change; 3] = [
            ("tags", |i| i.tags = vec!["x".into()]),
            ("other tags", |i| i.tags = vec!["y".into()]),
            ("max_visits", |i| i.max_visits = Some(3)),
        ];
        let mut seen = std::collections::HashSet::from([plain.clone()]);
        for (field, change) in changes {
            assert!(
                seen.insert(key(change)),
                "{field} left the key as another's"
            );
        }
        for (field, change) in [
            (
                "pass_query",
                (|i| i.pass_query = true) as fn(&mut CreateInput),
            ),
            ("preview", |i| i.preview.title = Some("A title".into())),
        ] {
            assert_eq!(key(change), plain, "{field} moved the key");
        }
        // The order tags are given in is not a difference.
        assert_eq!(
            key(|i| i.tags = vec!["b".into(), "a".into()]),
            key(|i| i.tags = vec!["a".into(), "b".into(), "a".into()])
        );
    }
}
