//! The web console at `/console/`: a static page and its ES modules, compiled into the binary
//! (`shortener/console/`), that talk to the JSON API with the API key the user pastes, or with
//! the session of a person signed in through the identity provider (`signin`).
//!
//! The assets are served under a path that holds a digest of their content
//! (`/console/assets/<digest>/app.js`), so they can be kept for a year (`immutable`) and an
//! upgrade is fetched at once; the page itself is revalidated on every load (`no-cache`, with
//! an `ETag`). Every response carries a Content-Security-Policy that allows scripts, styles and
//! requests to this origin only (no inline script, no `eval`, no framing), `nosniff` and no
//! referrer. The console only ever reads and writes through the API, so it can do nothing the
//! key (or the person's role) could not do with `curl`.

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::LazyLock;

/// The policy of every console response: this origin only, no inline script or `eval`, no
/// framing, forms post here only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' blob: data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
     base-uri 'none'";

/// The console's files: name, media type, content.
const FILES: &[(&str, &str, &str)] = &[
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/app.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/api.js"),
    ),
    (
        "dom.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/dom.js"),
    ),
    (
        "links.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/links.js"),
    ),
    (
        "detail.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/detail.js"),
    ),
    (
        "editor.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/editor.js"),
    ),
    (
        "importer.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/importer.js"),
    ),
    (
        "admin.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/admin.js"),
    ),
    (
        "keys.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/keys.js"),
    ),
    (
        "domains.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/domains.js"),
    ),
    (
        "routing.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/routing.js"),
    ),
    (
        "sharing.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/sharing.js"),
    ),
    (
        "chart.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/chart.js"),
    ),
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("../../console/console.css"),
    ),
];

const INDEX: &str = include_str!("../../console/index.html");

/// The digest of every file, which names the asset directory.
static DIGEST: LazyLock<String> = LazyLock::new(|| {
    let mut h = Sha256::new();
    for (name, _, body) in FILES {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(body.as_bytes());
    }
    hex::encode(&h.finalize()[..8])
});

/// The page, pointing at this build's asset directory.
static PAGE: LazyLock<String> =
    LazyLock::new(|| INDEX.replace("{assets}", &format!("/console/assets/{}", *DIGEST)));

/// The page's validator.
static PAGE_ETAG: LazyLock<String> = LazyLock::new(|| etag(PAGE.as_bytes()));

fn etag(body: &[u8]) -> String {
    format!("\"{}\"", hex::encode(&Sha256::digest(body)[..12]))
}

/// The headers every console response carries.
pub(super) fn secured(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// [`secured`] as the layer over every console route.
pub(super) async fn secure(response: Response) -> Response {
    secured(response)
}

/// The console and its sign-in over https only, for a year, on a node whose public URL is
/// https (`https`): a browser that has loaded it once never sends its session cookie or a
/// typed key over plain HTTP to that host again. Browsers ignore the header on a plain HTTP
/// answer, so a node behind a TLS proxy may send it as it is.
pub(super) async fn strict_transport(
    axum::extract::State(https): axum::extract::State<bool>,
    mut response: Response,
) -> Response {
    if https {
        response.headers_mut().insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
    }
    response
}

fn matches(headers: &HeaderMap, tag: &str) -> bool {
    headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"))
}

fn body(
    headers: &HeaderMap,
    tag: &str,
    cache: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
) -> Response {
    let validators = [
        (header::ETAG, tag.to_string()),
        (header::CACHE_CONTROL, cache.to_string()),
    ];
    if matches(headers, tag) {
        return secured((StatusCode::NOT_MODIFIED, validators).into_response());
    }
    secured(
        (
            StatusCode::OK,
            validators,
            [(header::CONTENT_TYPE, content_type)],
            bytes,
        )
            .into_response(),
    )
}

/// `GET /console/`: the page.
pub async fn page(headers: HeaderMap) -> Response {
    body(
        &headers,
        &PAGE_ETAG,
        "no-cache",
        "text/html; charset=utf-8",
        PAGE.as_bytes(),
    )
}

/// `GET /console/assets/{digest}/{file}`: one file of this build, kept for a year.
pub async fn asset(headers: HeaderMap, Path((digest, name)): Path<(String, String)>) -> Response {
    let found = (digest == *DIGEST)
        .then(|| FILES.iter().find(|(file, _, _)| *file == name))
        .flatten();
    match found {
        Some((_, content_type, text)) => {
            static TAGS: LazyLock<Vec<String>> =
                LazyLock::new(|| FILES.iter().map(|(_, _, b)| etag(b.as_bytes())).collect());
            let index = FILES
                .iter()
                .position(|(file, _, _)| *file == name)
                .unwrap_or(0);
            body(
                &headers,
                &TAGS[index],
                "public, max-age=31536000, immutable",
                content_type,
                text.as_bytes(),
            )
        }
        None => secured(
            (
                StatusCode::NOT_FOUND,
                [(header::CACHE_CONTROL, "no-store")],
                "not found\n",
            )
                .into_response(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_this_builds_assets_and_loads_nothing_from_elsewhere() {
        assert!(PAGE.contains(&format!("/console/assets/{}/app.js", *DIGEST)));
        assert!(!PAGE.contains("{assets}"));
        for (name, _, text) in FILES {
            // The SVG namespace and two placeholders are the only absolute URLs, and fetch none.
            let text = text
                .replace("http://www.w3.org/2000/svg", "")
                .replace("https://example.com/landing", "")
                .replace("https://example.com/card.png", "");
            for forbidden in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "eval(",
                "new Function",
                "document.write",
                "http://",
                "https://",
                "//cdn",
            ] {
                assert!(!text.contains(forbidden), "{name} uses {forbidden}");
            }
        }
        assert!(
            !INDEX.contains("<script>") && !INDEX.contains("style="),
            "inline script or style in the page"
        );
    }
}
