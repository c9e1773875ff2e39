//! The fixed routes and files the direct dispatch must leave to the router.

#[test]
fn every_fixed_first_segment_and_ops_path_is_a_reserved_word() {
    for segment in super::FIXED_SEGMENTS
        .iter()
        .chain(&["healthz", "readyz", "livez", "metrics"])
    {
        assert!(
            codespace::shape::is_reserved(segment),
            "{segment} is routed but not reserved"
        );
    }
}

#[test]
fn fixed_files_are_no_code_and_never_the_fast_path() {
    for path in super::FIXED_FILES.iter().map(|f| format!("/{f}")).chain([
        super::branded::AASA_PATH.to_string(),
        super::branded::ASSETLINKS_PATH.to_string(),
    ]) {
        for method in [axum::http::Method::GET, axum::http::Method::HEAD] {
            let request = axum::http::Request::builder()
                .method(method)
                .uri(&path)
                .body(())
                .expect("request");
            assert_eq!(super::redirect::direct_code(&request), None, "{path}");
        }
        let segment = path.trim_start_matches('/');
        for length in 4..=11 {
            assert!(
                crate::domain::ShortCode::parse(segment, length).is_err(),
                "{path} parses as a code"
            );
            assert!(
                crate::domain::check_legacy_code(segment, length).is_err(),
                "{path} imports as a code"
            );
        }
    }
}
