use super::*;

use crate::domain::target::AnyHost as Anything;

#[test]
fn routes_round_trip_and_plain_links_store_nothing() {
    assert_eq!(Routes::default().to_stored(), None);
    let routes = Routes {
        ios: Some("myapp://item/7".into()),
        variants: vec![
            Variant {
                url: "https://a.example/".into(),
                weight: 30,
            },
            Variant {
                url: "https://b.example/".into(),
                weight: 70,
            },
        ],
        ..Default::default()
    };
    let stored = routes.to_stored().expect("stored");
    assert_eq!(Routes::from_stored(Some(&stored)), routes);
}

#[test]
fn app_targets_and_splits_are_checked() {
    let app = |t: &str| app_target("ios", Some(t.into()), 2048, &Anything);
    assert_eq!(
        app("myapp://item/7").expect("app"),
        Some("myapp://item/7".into())
    );
    assert_eq!(
        app("https://apps.apple.com/app/id1").expect("store"),
        Some("https://apps.apple.com/app/id1".into())
    );
    for bad in [
        "javascript:alert(1)",
        "data:text/html,x",
        "not a url",
        "file:///etc/passwd",
    ] {
        assert_eq!(
            app(bad).expect_err(bad).code(),
            "invalid_app_target",
            "{bad}"
        );
    }
    let split = |w: &[i64]| {
        variants(
            w.iter()
                .map(|w| VariantInput {
                    url: format!("https://{w}.example/"),
                    weight: *w,
                })
                .collect(),
            2048,
            &Anything,
        )
    };
    assert!(split(&[50, 50]).is_ok());
    for bad in [
        &[100][..],
        &[50, 49],
        &[0, 100],
        &[60, 60],
        &[10; 11],
        &[-50, 150],
    ] {
        assert_eq!(
            split(bad).expect_err("bad").code(),
            "invalid_variants",
            "{bad:?}"
        );
    }
}
