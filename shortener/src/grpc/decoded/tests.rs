//! The reckoner against messages prost encodes, split every way, and bytes no decoder takes.

use super::*;

fn reckon(shape: &'static Shape, bound: usize, bytes: &[u8]) -> Result<usize, Refusal> {
    let mut reckoner = Reckoner::new(shape, bound);
    reckoner.feed(bytes)?;
    Ok(reckoner.charged())
}

fn link(url: &str, tags: &[&str]) -> pb::CreateLinkRequest {
    pb::CreateLinkRequest {
        url: url.into(),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        expires_at: Some(prost_types::Timestamp {
            seconds: 1,
            nanos: 2,
        }),
        max_visits: Some(300),
        rules: vec![pb::Rule {
            url: "https://r.example".into(),
            conditions: vec![pb::Condition {
                r#type: "country".into(),
                key: String::new(),
                values: vec!["DE".into(), "FR".into()],
            }],
            variants: vec![],
        }],
        ..Default::default()
    }
}

#[test]
fn a_batch_is_charged_its_structs_and_texts() {
    let batch = pb::BatchCreateLinksRequest {
        items: vec![link("https://a.example/x", &["t1", "tag2"]), link("u", &[])],
    };
    let strings = size_of::<String>();
    let one_rule = RULE.size + "https://r.example".len() + CONDITION.size + "country".len();
    let values = 2 * (strings + 2);
    let expected = BATCH.size
        + 2 * (CREATE.size + one_rule + values)
        + "https://a.example/x".len()
        + (strings + 2)
        + (strings + 4)
        + 1;
    assert_eq!(reckon(&BATCH, usize::MAX, &framed(&batch)), Ok(expected));
}

#[test]
fn the_charge_does_not_depend_on_how_the_bytes_are_split() {
    let batch = pb::BatchCreateLinksRequest {
        items: (0..20)
            .map(|i| link(&format!("https://example.com/{i}"), &["a", "b"]))
            .collect(),
    };
    let mut stream = framed(&batch);
    stream.extend(framed(&pb::BatchCreateLinksRequest::default()));
    stream.extend(framed(&batch));
    let whole = reckon(&BATCH, usize::MAX, &stream).unwrap();
    for size in [1, 2, 3, 5, 7, 64] {
        let mut reckoner = Reckoner::new(&BATCH, usize::MAX);
        for piece in stream.chunks(size) {
            reckoner.feed(piece).unwrap();
        }
        assert_eq!(reckoner.charged(), whole, "pieces of {size} bytes");
    }
}

#[test]
fn empty_elements_are_refused_long_before_their_decoded_size() {
    // 100,000 empty rows: 200 KB on the wire, several times that decoded.
    let message = pb::ImportLinksRequest {
        rows: vec![pb::ImportRow::default(); 100_000],
        dry_run: false,
        ..Default::default()
    };
    let bytes = framed(&message);
    let bound = 4 * bytes.len();
    assert_eq!(
        reckon(&IMPORT, bound, &bytes),
        Err(Refusal::TooLarge { bound })
    );
    // The refusal comes before the message's last byte: the decoder never has it whole.
    let mut reckoner = Reckoner::new(&IMPORT, bound);
    let before_last = &bytes[..bytes.len() - 1];
    assert_eq!(reckoner.feed(before_last), Err(Refusal::TooLarge { bound }));
}

#[test]
fn an_import_rows_texts_and_routing_are_charged() {
    let message = pb::ImportLinksRequest {
        rows: vec![pb::ImportRow {
            url: "https://example.com/".into(),
            code: Some("old".into()),
            tags: vec!["t".into()],
            domain: Some("go.example".into()),
            utm_source: Some("news".into()),
            title: Some("A title".into()),
            state: "active".into(),
            rules: vec![pb::Rule {
                url: "https://r.example".into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        domain: Some("all.example".into()),
        default_hosts: vec!["a.example".into(), "bb.example".into()],
        ..Default::default()
    };
    let strings = size_of::<String>();
    let expected = IMPORT.size
        + IMPORT_ROW.size
        + "https://example.com/".len()
        + "old".len()
        + (strings + 1)
        + "go.example".len()
        + "news".len()
        + "A title".len()
        + "active".len()
        + RULE.size
        + "https://r.example".len()
        + "all.example".len()
        + (strings + "a.example".len())
        + (strings + "bb.example".len());
    assert_eq!(reckon(&IMPORT, usize::MAX, &framed(&message)), Ok(expected));
}

#[test]
fn each_message_of_a_stream_is_charged_alone() {
    let message = pb::ImportLinksRequest {
        rows: vec![
            pb::ImportRow {
                url: "https://example.com/".into(),
                ..Default::default()
            };
            100
        ],
        dry_run: true,
        ..Default::default()
    };
    let one = framed(&message);
    let charge = reckon(&IMPORT, usize::MAX, &one).unwrap();
    let mut reckoner = Reckoner::new(&IMPORT, charge);
    for _ in 0..50 {
        reckoner.feed(&one).unwrap();
    }
    assert_eq!(reckoner.charged(), charge);
}

#[test]
fn a_compressed_message_is_passed_over_unread() {
    let mut bytes = framed(&pb::ImportLinksRequest {
        rows: vec![pb::ImportRow::default(); 1000],
        dry_run: false,
        ..Default::default()
    });
    bytes[0] = 1;
    assert_eq!(reckon(&IMPORT, 10, &bytes), Ok(IMPORT.size));
}

#[test]
fn ten_byte_numbers_and_empty_texts_are_read() {
    let mut item = link("https://example.com/", &["", "x"]);
    item.variants = vec![pb::Variant {
        url: "https://v.example/".into(),
        weight: -1,
    }];
    item.alias = Some(String::new());
    let batch = pb::BatchCreateLinksRequest { items: vec![item] };
    let bytes = framed(&batch);
    let expected = reckon(&BATCH, usize::MAX, &bytes).unwrap();
    item = batch.items[0].clone();
    item.variants.clear();
    let without = reckon(
        &BATCH,
        usize::MAX,
        &framed(&pb::BatchCreateLinksRequest { items: vec![item] }),
    )
    .unwrap();
    assert_eq!(
        expected - without,
        VARIANT.size + "https://v.example/".len()
    );
}

#[test]
fn bytes_no_decoder_takes_are_refused() {
    let frame = |body: &[u8]| {
        let mut out = vec![0];
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(body);
        out
    };
    let cases: &[(&str, Vec<u8>)] = &[
        (
            "a length past the message's end",
            frame(&[0x0a, 0x05, b'a']),
        ),
        (
            "a row's length past its message's end",
            frame(&[0x0a, 0x02, 0x0a, 0x05]),
        ),
        (
            "a key cut off by the message's end",
            frame(&[0x0a, 0x00, 0x80]),
        ),
        (
            "a number cut off by the message's end",
            frame(&[0x10, 0x80]),
        ),
        (
            "a varint of eleven bytes",
            frame(&[
                0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ]),
        ),
        (
            "a key of eleven bytes",
            frame(&[
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ]),
        ),
        ("field number zero", frame(&[0x02, 0x00])),
        ("a group", frame(&[0x0b, 0x0c])),
        ("a wire type that does not exist", frame(&[0x0e, 0x00])),
        (
            "a fixed64 cut off by the message's end",
            frame(&[0x09, 1, 2, 3]),
        ),
    ];
    for (what, bytes) in cases {
        assert_eq!(
            reckon(&IMPORT, usize::MAX, bytes),
            Err(Refusal::Malformed),
            "{what}"
        );
    }
    // Fields the schema does not know, of every wire type, are passed over and cost nothing.
    let unknown = frame(&[
        0x78, 0x05, 0x7d, 1, 2, 3, 4, 0x79, 1, 2, 3, 4, 5, 6, 7, 8, 0x7a, 0x02, 0x01, 0x02,
    ]);
    assert_eq!(reckon(&IMPORT, usize::MAX, &unknown), Ok(IMPORT.size));
}
