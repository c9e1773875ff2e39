//! A link's routing through CSV: an export carries the rules, app targets, split, UTM
//! parameters, `pass_query` and preview in columns of their own, and importing the file on a
//! fresh node makes links that redirect the same; bad routing cells are refused per row,
//! naming the field, with nothing written.

use crate::helpers::{Backend, Node, Stack};
use crate::rules::{IPHONE, node};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// The export's header: the link's columns, then its routing's.
const HEADER: &str = "code,url,tags,created_at,expires_at,max_visits,state,short_url,tenant,clicks,domain,\
rules,ios,android,variants,utm_source,utm_medium,utm_campaign,utm_term,utm_content,pass_query,\
preview_title,preview_description,preview_image,protected";

/// The fields a link's routing is read back by.
const ROUTING: [&str; 14] = [
    "url",
    "rules",
    "ios",
    "android",
    "variants",
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "utm_term",
    "utm_content",
    "pass_query",
    "title",
    "description",
    "image",
];

/// A visit: the path, its headers, the `Location` it must get.
type Visit<'a> = (String, Vec<(&'a str, &'a str)>, &'a str);

/// A bad row: its cells by column name, the error, what the message names.
type BadCells<'a> = (Vec<(&'a str, String)>, &'a str, &'a str);

pub(crate) async fn create(node: &Node, body: Value) -> String {
    let (status, made) = node.create(body.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}: {made}");
    made["code"].as_str().expect("code").to_string()
}

/// The routing fields of the link `code` on `node`.
pub(crate) async fn routing(node: &Node, code: &str) -> Value {
    let (status, link) = node.get(code).await;
    assert_eq!(status, StatusCode::OK, "{code}: {link}");
    ROUTING
        .iter()
        .map(|field| (field.to_string(), link[*field].clone()))
        .collect()
}

/// What a visit of `code{query}` with `headers` answered: status, `Location`, and the body
/// when it is a page.
pub(crate) async fn visit(
    node: &Node,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String, String) {
    let mut request = node.client.get(format!("{}/{path}", node.base));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("visit");
    let status = response.status().as_u16();
    let location = response
        .headers()
        .get("location")
        .map(|v| v.to_str().expect("ascii").to_string())
        .unwrap_or_default();
    (status, location, response.text().await.expect("body"))
}

/// The answer lines of a CSV import of `body` (the summary last).
async fn import(node: &Node, body: String) -> Vec<Value> {
    let (status, lines) = node.import("text/csv", body, "").await;
    assert_eq!(status, StatusCode::OK, "{lines:?}");
    assert!(lines.last().is_some_and(|l| l.get("summary").is_some()));
    lines
}

async fn a_csv_export_imports_into_links_that_route_the_same(backend: Backend) {
    let stack = Stack::new(backend).await;
    let from = node(&stack, "from").await;
    let routed = create(
        &from,
        json!({
            "url": "https://fallback.example/",
            "rules": [
                {"url": "https://phone.example/", "conditions": [{"type": "device", "value": "mobile"}]},
                {"url": "https://promo.example/", "conditions": [{"type": "query", "key": "c", "value": ["a", "b"]}]},
            ],
            "ios": "myapp://item/7",
            "android": "https://play.google.com/store/apps/details?id=com.example.app",
            "utm_source": "news",
            "utm_campaign": "spring sale",
            "pass_query": true,
            "title": "Spring, \"sale\"",
            "description": "Everything, 20 % off",
            "image": "https://img.example/a.png?x=1&y=2",
        }),
    )
    .await;
    let split = create(
        &from,
        json!({"url": "https://plain.example/", "utm_medium": "mail", "utm_term": "t", "utm_content": "c",
               "variants": [{"url": "https://a.example/", "weight": 70}, {"url": "https://b.example/", "weight": 30}]}),
    )
    .await;
    let plain = create(&from, json!({"url": "https://plain.example/only"})).await;

    let (status, file) = from.export("format=csv").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(file.lines().next(), Some(HEADER));
    let mut reader = csv::Reader::from_reader(file.as_bytes());
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("a row")).collect();
    assert_eq!(rows.len(), 3, "{file}");
    let plain_row = rows
        .iter()
        .find(|r| r[0] == *plain)
        .expect("the plain link");
    assert_eq!(
        plain_row.iter().skip(11).collect::<Vec<_>>(),
        [
            "", "", "", "", "", "", "", "", "", "false", "", "", "", "false"
        ],
        "a plain link's routing cells are empty"
    );

    // A fresh deployment imports the file as it is.
    let other = Stack::new(backend).await;
    let to = node(&other, "to").await;
    let lines = import(&to, file.clone()).await;
    let summary = &lines.last().expect("summary")["summary"];
    assert_eq!(
        (&summary["created"], &summary["errors"]),
        (&json!(3), &json!(0)),
        "{lines:?}"
    );
    for code in [&routed, &split, &plain] {
        assert_eq!(
            routing(&to, code).await,
            routing(&from, code).await,
            "{code}"
        );
    }
    let (_, read) = to.get(&routed).await;
    assert_eq!(read["title"], "Spring, \"sale\"");
    assert_eq!(
        read["rules"][1]["conditions"][0]["value"],
        json!(["a", "b"])
    );

    // Both answer every visit alike, with the UTM parameters and the query passed on.
    let crawler = [("user-agent", "Twitterbot/1.0")];
    let split_cookie = |i| format!("sv={i}");
    let (first, second) = (split_cookie(0), split_cookie(1));
    #[rustfmt::skip]
    let cases: Vec<Visit> = vec![
        (routed.clone(), vec![], "https://fallback.example/?utm_source=news&utm_campaign=spring+sale"),
        (format!("{routed}?ref=x"), vec![], "https://fallback.example/?utm_source=news&utm_campaign=spring+sale&ref=x"),
        (format!("{routed}?c=b"), vec![], "https://promo.example/?utm_source=news&utm_campaign=spring+sale&c=b"),
        (routed.clone(), vec![("user-agent", IPHONE)], "https://phone.example/?utm_source=news&utm_campaign=spring+sale"),
        (routed.clone(), crawler.to_vec(), ""),
        (split.clone(), vec![("cookie", first.as_str())], "https://a.example/?utm_medium=mail&utm_term=t&utm_content=c"),
        (split.clone(), vec![("cookie", second.as_str())], "https://b.example/?utm_medium=mail&utm_term=t&utm_content=c"),
        (plain.clone(), vec![], "https://plain.example/only"),
    ];
    for (path, headers, want) in &cases {
        let there = visit(&from, path, headers).await;
        let here = visit(&to, path, headers).await;
        assert_eq!(here, there, "{path} {headers:?}");
        assert_eq!(here.1, *want, "{path} {headers:?}");
    }
    let (status, _, page) = visit(&to, &routed, &crawler).await;
    assert_eq!(status, 200);
    assert!(
        page.contains(r#"<meta property="og:title" content="Spring, &quot;sale&quot;">"#),
        "{page}"
    );
    // Importing the file again finds every link.
    let again = import(&to, file).await;
    assert_eq!(
        again.last().expect("summary")["summary"]["exists"],
        3,
        "{again:?}"
    );
}
crate::on_both_stores!(a_csv_export_imports_into_links_that_route_the_same);

async fn bad_routing_cells_are_refused_per_row_naming_the_field(backend: Backend) {
    let stack = Stack::new(backend).await;
    let node = stack.node("bad").await;
    let before = node.stored_links().await;
    let header = "url,code,rules,variants,utm_source,utm_campaign,pass_query,\
                  preview_title,preview_description,preview_image,ios";
    let rule =
        r#"[{"url": "https://r.example/", "conditions": [{"type": "planet", "value": "mars"}]}]"#;
    let split = r#"[{"url": "https://a.example/", "weight": 50}, {"url": "https://b.example/", "weight": 49}]"#;
    // Each: the cells after `url,code` (by column name), the error, what the message names.
    #[rustfmt::skip]
    let table: Vec<BadCells> = vec![
        (vec![("rules", "not json".into())], "invalid_rules", "rules"),
        (vec![("rules", r#"{"url": "x"}"#.into())], "invalid_rules", "rules"),
        (vec![("rules", rule.into())], "invalid_rules", "rules[0].conditions[0]"),
        (vec![("variants", split.into())], "invalid_variants", "variants"),
        (vec![("variants", "[1, 2]".into())], "invalid_variants", "variants"),
        (vec![("utm_source", "a&b".into())], "invalid_utm", "utm_source"),
        (vec![("utm_campaign", "x=y".into())], "invalid_utm", "utm_campaign"),
        (vec![("utm_campaign", "#frag".into())], "invalid_utm", "utm_campaign"),
        (vec![("utm_source", "tab\there".into())], "invalid_utm", "utm_source"),
        (vec![("utm_source", "x".repeat(201))], "invalid_utm", "utm_source"),
        (vec![("pass_query", "yes".into())], "invalid_pass_query", "pass_query"),
        (vec![("pass_query", "1".into())], "invalid_pass_query", "pass_query"),
        (vec![("preview_title", "t".repeat(201))], "invalid_preview", "title"),
        (vec![("preview_description", "line\u{7}bell".into())], "invalid_preview", "description"),
        (vec![("preview_image", "javascript:alert(1)".into())], "invalid_preview", "image"),
        (vec![("ios", "javascript:alert(1)".into())], "invalid_app_target", "ios"),
    ];
    let columns: Vec<&str> = header.split(',').collect();
    let mut body = format!("{header}\n");
    for (i, (cells, _, _)) in table.iter().enumerate() {
        let mut record = vec![format!("https://e.example/{i}"), format!("bad-{i}")];
        for column in &columns[2..] {
            let cell = cells.iter().find(|(name, _)| name == column);
            record.push(cell.map(|(_, text)| text.clone()).unwrap_or_default());
        }
        let mut writer = csv::Writer::from_writer(Vec::new());
        writer.write_record(&record).expect("a row");
        body.push_str(&String::from_utf8(writer.into_inner().expect("bytes")).expect("utf-8"));
    }
    // A good row after them: the bad ones fail alone.
    body.push_str("https://e.example/good,good-1,,,news,,true,,,,\n");
    let lines = import(&node, body).await;
    for (i, (cells, error, field)) in table.iter().enumerate() {
        let line = lines
            .iter()
            .find(|l| l["row"] == i + 1)
            .unwrap_or_else(|| panic!("no row {} in {lines:?}", i + 1));
        assert_eq!(
            (line["status"].as_str(), line["error"].as_str()),
            (Some("error"), Some(*error)),
            "{cells:?}: {line}"
        );
        let message = line["message"].as_str().expect("message");
        assert!(message.contains(field), "{cells:?}: {message}");
        assert_eq!(node.get(&format!("bad-{i}")).await.0, StatusCode::NOT_FOUND);
    }
    let summary = &lines.last().expect("summary")["summary"];
    assert_eq!(
        (&summary["created"], &summary["errors"]),
        (&json!(1), &json!(table.len())),
        "{lines:?}"
    );
    assert_eq!(
        node.stored_links().await,
        before + 1,
        "a refused row wrote a link"
    );
    let (_, good) = node.get("good-1").await;
    assert_eq!(
        (&good["utm_source"], &good["pass_query"]),
        (&json!("news"), &json!(true))
    );
}
crate::on_both_stores!(bad_routing_cells_are_refused_per_row_naming_the_field);

/// Links an import must not make open: their codes.
pub(crate) struct Closed {
    pub(crate) disabled: String,
    pub(crate) deleted: String,
    pub(crate) protected: String,
    pub(crate) used_up: String,
}

/// Makes on `node` a disabled, a deleted, a password-protected and a used-up link (its one
/// visit spent by a person: a bot's would not count).
pub(crate) async fn closed_links(node: &Node) -> Closed {
    let disabled = create(node, json!({"url": "https://disabled.example/"})).await;
    let deleted = create(node, json!({"url": "https://deleted.example/"})).await;
    let protected = create(
        node,
        json!({"url": "https://protected.example/", "password": "correct horse"}),
    )
    .await;
    assert_eq!(
        node.patch(&disabled, json!({ "disabled": true })).await.0,
        StatusCode::OK
    );
    assert_eq!(node.delete(&deleted).await, StatusCode::NO_CONTENT);
    let used_up = create(
        node,
        json!({"url": "https://used-up.example/", "max_visits": 1}),
    )
    .await;
    let person = [("user-agent", IPHONE)];
    assert!((301..=308).contains(&visit(node, &used_up, &person).await.0));
    Closed {
        disabled,
        deleted,
        protected,
        used_up,
    }
}

/// An export carries each link's state, its visits and whether it is password protected;
/// importing it elsewhere refuses the disabled, deleted, used-up (its visit limit reached) and
/// protected ones with a row error each (a takedown or a spent link does not come back through a
/// migration, and a password that is not in the file does not leave its link open), and makes
/// the active and expired ones as they were.
async fn disabled_deleted_and_protected_links_are_not_imported_as_open_ones(backend: Backend) {
    let stack = Stack::new(backend).await;
    let from = node(&stack, "from").await;
    let active = create(&from, json!({"url": "https://active.example/"})).await;
    let Closed {
        disabled,
        deleted,
        protected,
        used_up,
    } = closed_links(&from).await;
    let person = [("user-agent", IPHONE)];
    assert_eq!(
        visit(&from, &used_up, &person).await.0,
        410,
        "past its limit"
    );
    // The export carries the visit once the node has flushed its count.
    let counted = |file: &str| {
        csv::Reader::from_reader(file.as_bytes())
            .records()
            .map(|r| r.expect("a row"))
            .any(|r| r[0] == *used_up && &r[9] == "1")
    };
    let flushed = testkit::wait_until(std::time::Duration::from_secs(20), || async {
        counted(&from.export("format=csv").await.1)
    })
    .await;
    let (status, file) = from.export("format=csv").await;
    assert!(flushed && status == StatusCode::OK, "{status}: {file}");
    assert_eq!(file.lines().count(), 6, "{file}");

    // The import's answer lines name rows by number: the file's rows, in order.
    let codes: Vec<String> = csv::Reader::from_reader(file.as_bytes())
        .records()
        .map(|r| r.expect("a row")[0].to_string())
        .collect();
    let other = Stack::new(backend).await;
    let to = node(&other, "to").await;
    let lines = import(&to, file).await;
    let by_code = |code: &str| {
        let row = codes.iter().position(|c| c == code).expect("exported") + 1;
        lines
            .iter()
            .find(|l| l["row"] == row)
            .unwrap_or_else(|| panic!("no line for {code} in {lines:?}"))
            .clone()
    };
    for (code, error) in [
        (&disabled, "not_active"),
        (&deleted, "not_active"),
        (&used_up, "not_active"),
        (&protected, "password_protected"),
    ] {
        let line = by_code(code);
        assert_eq!(
            (line["status"].as_str(), line["error"].as_str()),
            (Some("error"), Some(error)),
            "{line}"
        );
        assert_eq!(line["code"], json!(code), "named by its code too: {line}");
        assert_eq!(to.get(code).await.0, StatusCode::NOT_FOUND, "{code}");
        assert_eq!(visit(&to, code, &[]).await.0, 404, "{code}");
    }
    assert_eq!(by_code(&active)["status"], "created");
    let (status, location, _) = visit(&to, &active, &[]).await;
    assert!((301..=308).contains(&status), "{status}");
    assert_eq!(location, "https://active.example/");
    let summary = &lines.last().expect("summary")["summary"];
    assert_eq!(
        (&summary["created"], &summary["errors"]),
        (&json!(1), &json!(4)),
        "{lines:?}"
    );
}
crate::on_both_stores!(disabled_deleted_and_protected_links_are_not_imported_as_open_ones);

/// Text a caller chose that a spreadsheet would compute (`=HYPERLINK(…)`, `+…`, `-…`, `@…`)
/// leaves in the CSV export with a `'` in front, which spreadsheets show as text, and an
/// import takes it off again: the links come back with the values they had.
async fn formula_cells_leave_as_text_and_import_as_they_were(backend: Backend) {
    let stack = Stack::new(backend).await;
    let from = node(&stack, "from").await;
    let title = r#"=HYPERLINK("https://evil.example/","Open")"#;
    let code = create(
        &from,
        json!({
            "url": "https://plain.example/sheet",
            "title": title,
            "description": "+1 and more",
            "utm_source": "-news",
            "utm_medium": "@team",
            "utm_campaign": "'+quoted",
        }),
    )
    .await;
    let (status, file) = from.export("format=csv").await;
    assert_eq!(status, StatusCode::OK);
    let mut reader = csv::Reader::from_reader(file.as_bytes());
    let header = reader.headers().expect("header").clone();
    let row = reader
        .records()
        .map(|r| r.expect("a row"))
        .find(|r| r[0] == *code)
        .expect("the link's row");
    let cell = |name: &str| row[header.iter().position(|h| h == name).expect(name)].to_string();
    #[rustfmt::skip]
    let want = [
        ("preview_title", format!("'{title}")),
        ("preview_description", "'+1 and more".to_string()),
        ("utm_source", "'-news".to_string()),
        ("utm_medium", "'@team".to_string()),
        ("utm_campaign", "''+quoted".to_string()),
        ("url", "https://plain.example/sheet".to_string()),
    ];
    for (name, value) in want {
        assert_eq!(cell(name), value, "{name} in {file}");
    }
    assert!(
        row.iter()
            .all(|c| !c.starts_with(['=', '+', '-', '@', '\t', '\r'])),
        "no cell a spreadsheet computes: {row:?}"
    );

    let other = Stack::new(backend).await;
    let to = node(&other, "to").await;
    let lines = import(&to, file).await;
    assert_eq!(
        lines.last().expect("summary")["summary"]["created"],
        1,
        "{lines:?}"
    );
    assert_eq!(routing(&to, &code).await, routing(&from, &code).await);
    let (_, read) = to.get(&code).await;
    assert_eq!(
        (&read["title"], &read["utm_campaign"]),
        (&json!(title), &json!("'+quoted"))
    );
}
crate::on_both_stores!(formula_cells_leave_as_text_and_import_as_they_were);
