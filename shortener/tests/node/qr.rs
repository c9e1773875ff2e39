//! QR codes: the PNG and the SVG decode to exactly the link's short URL; bad options are
//! refused; another tenant's code is 404; a matching `ETag` is 304; gRPC serves the same bytes.

use crate::helpers::{API_KEY, Backend, Stack, authed};
use crate::tenants::write_keys;
use proto::shortener::v1 as pb;
use reqwest::StatusCode;
use serde_json::json;

/// The text of the one QR code in a grayscale image.
fn decode(width: usize, height: usize, pixel: impl Fn(usize, usize) -> u8) -> String {
    let mut image = rqrr::PreparedImage::prepare_from_greyscale(width, height, pixel);
    let grids = image.detect_grids();
    assert_eq!(grids.len(), 1, "one QR code in the image");
    grids[0].decode().expect("a QR code that decodes").1
}

fn decode_png(bytes: &[u8]) -> String {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    // Expand 1-bit grayscale to a byte per pixel.
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let (w, h) = (info.width as usize, info.height as usize);
    let stride = info.line_size;
    decode(w, h, |x, y| buf[y * stride + x])
}

/// Rasterises the SVG the node draws (a white square and one path of `M x y h n v1 h-n z`
/// runs in a view box of modules) at 4 pixels a module.
fn decode_svg(text: &str) -> String {
    let view = text.split("viewBox=\"0 0 ").nth(1).expect("a view box");
    let side: usize = view
        .split(' ')
        .next()
        .expect("side")
        .parse()
        .expect("a number");
    let path = text
        .split(" d=\"")
        .nth(1)
        .expect("a path")
        .split('"')
        .next()
        .expect("path");
    let mut dark = vec![false; side * side];
    for run in path.split('M').filter(|r| !r.is_empty()) {
        let (x, rest) = run.split_once(' ').expect("x");
        let (y, rest) = rest.split_once('h').expect("y");
        let n = rest.split('v').next().expect("n");
        let (x, y, n): (usize, usize, usize) = (
            x.parse().expect("x"),
            y.parse().expect("y"),
            n.parse().expect("n"),
        );
        for i in x..x + n {
            dark[y * side + i] = true;
        }
    }
    let scale = 4;
    decode(side * scale, side * scale, |px, py| {
        if dark[(py / scale) * side + px / scale] {
            0
        } else {
            255
        }
    })
}

async fn qr_codes_decode_to_the_short_url(backend: Backend) {
    let stack = Stack::new(backend).await;
    let path = stack.dir.path().join("api-keys.toml");
    let keys = write_keys(&path);
    let mut config = stack.config("qr");
    config.access.api_keys_file = Some(path);
    config.access.api_keys = vec![API_KEY.to_string()];
    let node = crate::helpers::Node::start(config).await;
    let (status, link) = node
        .create_with_key(json!({ "url": "https://example.com/qr" }), &keys.own)
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let code = link["code"].as_str().expect("code").to_string();
    let short_url = link["short_url"].as_str().expect("short url").to_string();
    let get = |query: String, key: &str| {
        node.client
            .get(format!("{}/api/v1/links/{code}/qr?{query}", node.base))
            .bearer_auth(key.to_string())
            .send()
    };
    for (query, ecc) in [
        ("format=png", "M"),
        ("format=png&size=512&margin=2&ecc=H", "H"),
        ("format=svg&ecc=L", "L"),
        ("", "M"),
    ] {
        let response = get(query.to_string(), &keys.own).await.expect("send");
        assert_eq!(response.status(), StatusCode::OK, "{query}");
        let png = query.contains("png");
        assert_eq!(
            response.headers()["content-type"],
            if png { "image/png" } else { "image/svg+xml" }
        );
        assert_eq!(
            response.headers()["cache-control"],
            "private, max-age=86400"
        );
        let etag = response.headers()["etag"]
            .to_str()
            .expect("etag")
            .to_string();
        let body = response.bytes().await.expect("body");
        let text = if png {
            decode_png(&body)
        } else {
            decode_svg(std::str::from_utf8(&body).expect("svg text"))
        };
        assert_eq!(text, short_url, "{query} (ecc {ecc})");
        // The same image again is 304 for a client that has it.
        let again = node
            .client
            .get(format!("{}/api/v1/links/{code}/qr?{query}", node.base))
            .bearer_auth(&keys.own)
            .header("if-none-match", &etag)
            .send()
            .await
            .expect("send");
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    }
    // gRPC draws the same image.
    let mut client = node.links_client().await;
    let mut request = tonic::Request::new(pb::GetLinkQrRequest {
        code: code.clone(),
        format: Some("png".into()),
        ..Default::default()
    });
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {}", keys.own).parse().expect("ascii"),
    );
    let image = client.get_link_qr(request).await.expect("qr").into_inner();
    assert_eq!(image.content_type, "image/png");
    assert_eq!(decode_png(&image.data), short_url);
    let http_png = get("format=png".into(), &keys.own)
        .await
        .expect("send")
        .bytes()
        .await
        .expect("body");
    assert_eq!(image.data, http_png.to_vec());

    // Another tenant's code is 404; bad options are 400; without a key, 401.
    assert_eq!(
        get(String::new(), &keys.other)
            .await
            .expect("send")
            .status(),
        StatusCode::NOT_FOUND
    );
    for (query, error) in [
        ("format=gif", "invalid_format"),
        ("size=10", "invalid_size"),
        ("size=99999", "invalid_size"),
        ("size=big", "invalid_query_parameter"),
        ("margin=40", "invalid_margin"),
        ("ecc=Z", "invalid_ecc"),
        ("colour=red", "invalid_query_parameter"),
    ] {
        let response = get(query.to_string(), &keys.own).await.expect("send");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{query}");
        let body: serde_json::Value = response.json().await.expect("json");
        assert_eq!(body["error"], error, "{query}");
    }
    let response = node
        .client
        .get(format!("{}/api/v1/links/{code}/qr", node.base))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let status = client
        .get_link_qr(authed(pb::GetLinkQrRequest {
            code,
            size: Some(1),
            ..Default::default()
        }))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
}
on_both_stores!(qr_codes_decode_to_the_short_url);
