//! A link's page in the console, in a real browser: the click chart spans the chosen period
//! (one bar per hour, empty hours drawn empty, the period's ends and a few ticks on the time
//! axis), says up to when its counts are complete, and the history tells each change in words.
//! The chart's screenshot is kept as `target/console-screenshots/details/chart.png`.

use crate::console::{Page, browser, driver, keys_file};
use crate::helpers::{Node, Stack, wait_for};
use chrono::{DateTime, Utc};
use fantoccini::Locator;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

/// Which columns of a PNG screenshot hold the chart's bar colour (`--accent`, #0b5fff), and
/// the image's width.
fn bar_columns(png_bytes: &[u8]) -> (Vec<usize>, usize) {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let channels = info.color_type.samples();
    let (width, height) = (info.width as usize, info.height as usize);
    let near = |a: u8, b: u8| a.abs_diff(b) < 24;
    let columns = (0..width)
        .filter(|&x| {
            (0..height).any(|y| {
                let p = &buf[y * info.line_size + x * channels..];
                near(p[0], 0x0b) && near(p[1], 0x5f) && near(p[2], 0xff)
            })
        })
        .collect();
    (columns, width)
}

async fn api(
    node: &Node,
    key: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = node
        .client
        .request(method, format!("{}/api/v1{path}", node.base))
        .bearer_auth(key);
    if let Some(body) = body {
        request = request
            .header("content-type", "application/merge-patch+json")
            .body(body.to_string());
    }
    let response = request.send().await.expect("send");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_links_page_charts_its_period_says_how_fresh_and_tells_its_history_in_words() {
    let stack = Stack::new(crate::helpers::Backend::Sqlite).await;
    let keys = stack.dir.path().join("api-keys.toml");
    let (writer, _) = keys_file(&keys);
    let mut config = stack.config("console-details");
    config.access.api_keys_file = Some(keys);
    config.listeners.public_url = None;
    let node = Node::start(config).await;
    let (status, made) = node
        .create_with_key(
            json!({ "url": "https://example.com/spring/launch", "tags": ["spring", "promo"] }),
            &writer,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let code = made["code"].as_str().expect("code").to_string();

    // Three visits by people, all in this hour; wait until the stats API counts them.
    for _ in 0..3 {
        assert_eq!(node.location(&code).await.0, StatusCode::FOUND);
    }
    let stats_path = format!("/links/{code}/stats?granularity=hour");
    let mut seen = Value::Null;
    wait_for(
        "the stats API counts the three visits",
        Duration::from_secs(10),
        async || {
            seen = api(&node, &writer, reqwest::Method::GET, &stats_path, None)
                .await
                .1;
            seen["totals"]["human"] == 3
        },
    )
    .await;
    assert_eq!(seen["totals"]["human"], 3, "never counted: {seen}");
    let api_as_of: DateTime<Utc> = seen["as_of"]
        .as_str()
        .expect("as_of")
        .parse()
        .expect("RFC 3339");

    let shots =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/console-screenshots/details");
    std::fs::create_dir_all(&shots).expect("screenshot directory");
    let driver = driver();
    let mut page = Page {
        client: browser(&driver).await,
        base: node.base.clone(),
        shots: shots.clone(),
        step: 0,
    };
    page.sign_in(&writer).await;
    page.client
        .goto(&format!("{}/console/#/links/{code}", node.base))
        .await
        .expect("detail");
    page.wait_text("#short-url", &code).await;

    // The chart of the last 24 hours: 24 bars, one of them with the visits and narrow, the
    // other 23 empty; the axis names the period's two ends and a few hours between them.
    let mut bars = Value::Null;
    wait_for("the chart is drawn", Duration::from_secs(10), async || {
        bars = page
            .eval(
                "const bars = [...document.querySelectorAll('svg.chart rect.bar')];
                 const chart = document.querySelector('svg.chart');
                 return chart && {
                   count: bars.length,
                   filled: bars.filter((b) => Number(b.dataset.visits) > 0)
                     .map((b) => [Number(b.dataset.visits), b.getBoundingClientRect().width, b.getBoundingClientRect().height]),
                   empty: bars.filter((b) => b.getBoundingClientRect().height === 0).length,
                   chart: chart.getBoundingClientRect().width,
                   ticks: [...chart.querySelectorAll('text.tick')].map((t) => t.textContent),
                 };",
            )
            .await;
        bars["count"] != json!(0) && !bars.is_null()
    })
    .await;
    assert_eq!(bars["count"], 24, "one bar per hour of the day: {bars}");
    let filled = bars["filled"].as_array().expect("filled bars");
    assert_eq!(filled.len(), 1, "the visits are in one hour: {bars}");
    assert_eq!(filled[0][0], 3, "{bars}");
    let (bar_width, bar_height) = (
        filled[0][1].as_f64().expect("width"),
        filled[0][2].as_f64().expect("height"),
    );
    let chart_width = bars["chart"].as_f64().expect("chart width");
    assert!(
        bar_width > 0.0 && bar_width < chart_width / 10.0 && bar_height > 0.0,
        "the hour's bar is {bar_width}x{bar_height} in a chart {chart_width} wide"
    );
    assert_eq!(bars["empty"], 23, "{bars}");
    let ticks: Vec<&str> = bars["ticks"]
        .as_array()
        .expect("ticks")
        .iter()
        .map(|t| t.as_str().expect("text"))
        .collect();
    assert!(ticks.len() >= 3, "a few ticks: {ticks:?}");
    let mut distinct = ticks.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), ticks.len(), "ticks repeat: {ticks:?}");
    assert_ne!(ticks.first(), ticks.last(), "{ticks:?}");

    // The picture: the bar colour fills a narrow band of the chart, not its width.
    let chart = page.wait("svg.chart").await;
    page.eval(
        "document.querySelector('svg.chart').scrollIntoView({ block: 'center' }); return null;",
    )
    .await;
    let png_bytes = chart.screenshot().await.expect("chart screenshot");
    let saved = shots.join("chart.png");
    std::fs::write(&saved, &png_bytes).expect("save the chart");
    let size = std::fs::metadata(&saved).expect("written").len();
    assert!(size > 2000, "the chart's PNG is {size} bytes");
    let (columns, image_width) = bar_columns(&png_bytes);
    assert!(
        !columns.is_empty() && columns.len() < image_width / 10,
        "{} of {image_width} columns hold bar colour",
        columns.len()
    );

    // The counts say up to when they are complete and how often they catch up.
    let fresh = page.wait_text("#stats-as-of", "Counts as of ").await;
    let text = fresh.text().await.expect("text");
    assert!(
        text.contains("updated every 0.2 s"),
        "the flush interval of the test node: {text:?}"
    );
    let shown: DateTime<Utc> = fresh
        .attr("title")
        .await
        .expect("title")
        .expect("the answer's as_of")
        .parse()
        .expect("RFC 3339");
    assert!(
        shown >= api_as_of && shown <= Utc::now(),
        "as_of {shown} is not from the answer the page read (after {api_as_of})"
    );
    assert!(
        text.starts_with(&format!("Counts as of {}, ", shown.format("%H:%M:%S"))),
        "{text:?} for {shown}"
    );

    // The other periods: every bucket drawn, the visits in the newest (this hour or UTC day),
    // the axis' labels all different.
    let period = page
        .client
        .find(Locator::Css("select[aria-label='Chart period']"))
        .await
        .expect("the period");
    for (value, buckets) in [("7d", 168), ("30d", 30), ("90d", 90)] {
        period
            .select_by_value(value)
            .await
            .expect("choose a period");
        let mut drawn = Value::Null;
        wait_for("the period's bars are drawn", Duration::from_secs(10), async || {
            drawn = page
                .eval(
                    "return [[...document.querySelectorAll('svg.chart rect.bar')].map((b) => Number(b.dataset.visits)),
                             [...document.querySelectorAll('svg.chart text.tick')].map((t) => t.textContent)];",
                )
                .await;
            drawn[0].as_array().is_some_and(|d| d.len() == buckets)
        })
        .await;
        let visits = drawn[0].as_array().expect("bars");
        assert_eq!(visits.len(), buckets, "{value}: {drawn}");
        // In the last bucket, or the one before if an hour (or day) ended since the visits.
        let filled: Vec<usize> = (0..buckets).filter(|&i| visits[i] != 0).collect();
        assert!(
            filled.len() == 1 && filled[0] + 2 >= buckets && visits[filled[0]] == 3,
            "{value}: {drawn}"
        );
        let mut ticks: Vec<&str> = drawn[1]
            .as_array()
            .expect("ticks")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(ticks.len() >= 3, "{value}: {drawn}");
        ticks.sort();
        ticks.dedup();
        assert_eq!(
            ticks.len(),
            drawn[1].as_array().expect("ticks").len(),
            "{value}: {drawn}"
        );
        page.check(&format!("chart-{value}")).await;
    }

    // Edit the target and the tags in the form; set an expiry through the API.
    page.click("Edit").await;
    page.type_into("Target URL", "https://example.com/spring/moved")
        .await;
    page.type_into("Tags", "spring, summer").await;
    page.click("Save").await;
    page.wait_text("#target", "https://example.com/spring/moved")
        .await;
    let (status, body) = api(
        &node,
        &writer,
        reqwest::Method::PATCH,
        &format!("/links/{code}"),
        Some(json!({ "expires_at": "2099-01-01T09:30:00Z" })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    page.client.refresh().await.expect("reload");
    page.wait_text(".events", "expires: never -> 2099-01-01 09:30")
        .await;
    let history = page
        .client
        .find(Locator::Css(".events"))
        .await
        .expect("history")
        .text()
        .await
        .expect("text");
    for line in [
        "url: https://example.com/spring/launch",
        "tags: promo, spring",
        "url: https://example.com/spring/launch -> https://example.com/spring/moved",
        "tags: promo, spring -> spring, summer",
        "expires: never -> 2099-01-01 09:30",
        "by marketing/campaigns",
    ] {
        assert!(history.contains(line), "{line:?} missing from {history:?}");
    }
    // One line per change, and no raw JSON.
    let shape = page
        .eval("return [document.querySelectorAll('.events pre').length, [...document.querySelectorAll('.events .changes li')].map((li) => li.textContent)];")
        .await;
    assert_eq!(shape[0], 0, "{shape}");
    assert!(
        !history.contains('{') && !history.contains("\"old\""),
        "{history:?}"
    );
    let lines = shape[1].as_array().expect("lines");
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.as_str().is_some_and(|l| l.contains(" -> ")))
            .count(),
        3,
        "url, tags and expiry changed: {shape}"
    );
    page.eval("document.getElementById('history-title').scrollIntoView(); return null;")
        .await;
    page.check("history").await;
    page.client.close().await.expect("close");
}
