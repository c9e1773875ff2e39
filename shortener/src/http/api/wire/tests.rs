use super::*;
use chrono::TimeZone;

#[test]
fn times_are_written_as_chrono_writes_them_to_the_millisecond() {
    let times = [
        Utc.timestamp_millis_opt(0).unwrap(),
        Utc.timestamp_millis_opt(1_700_000_000_123).unwrap(),
        Utc.timestamp_millis_opt(253_402_300_799_999).unwrap(),
        Utc.with_ymd_and_hms(12_000, 1, 2, 3, 4, 5).unwrap(),
        Utc.with_ymd_and_hms(-1, 12, 31, 23, 59, 59).unwrap(),
        Utc.with_ymd_and_hms(2016, 12, 31, 23, 59, 59).unwrap()
            + chrono::Duration::nanoseconds(1_500_000_000),
    ];
    for t in times {
        let expected = serde_json::to_string(&t.to_rfc3339_opts(SecondsFormat::Millis, true))
            .expect("serializes");
        assert_eq!(
            serde_json::to_string(&Millis(t)).expect("serializes"),
            expected
        );
    }
}

#[test]
fn a_link_is_serialized_with_its_short_url_and_escaped_fields() {
    let public = PublicBase::new("https://s.test/");
    let link = Link {
        code: "abc1234".into(),
        domain: None,
        routes: Default::default(),
        tenant: "t\"en".into(),
        owner: "ci".into(),
        url: "https://example.com/\"q\"\\b\u{1}/ü".into(),
        created_at: Utc.timestamp_millis_opt(1_700_000_000_123).unwrap(),
        expires_at: None,
        deleted_at: None,
        disabled_at: None,
        max_visits: Some(3),
        tags: vec!["a".into()],
        import_batch: None,
        password: None,
        clicks: Default::default(),
    };
    let now = Utc.timestamp_millis_opt(1_750_000_000_000).unwrap();
    let json: Value = serde_json::from_slice(
        &serde_json::to_vec(&LinkJson::at(&public, &link, now)).expect("serializes"),
    )
    .expect("JSON");
    assert_eq!(json["short_url"], "https://s.test/abc1234");
    assert_eq!(json["url"], link.url.as_str());
    assert_eq!(json["tenant"], "t\"en");
    assert_eq!(json["created_at"], "2023-11-14T22:13:20.123Z");
    assert_eq!(json["expires_at"], Value::Null);
    assert_eq!(json["max_visits"], 3);
}
