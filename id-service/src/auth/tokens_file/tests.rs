//! The tokens file's rules, one bad file at a time.

use super::*;

const RAW: &str = "raw-token-with-at-least-32-characters-0001";

fn digest_hex(token: &str) -> String {
    hex::encode(token::digest(token.as_bytes()))
}

fn entry(name: &str, secret: &str) -> String {
    format!(
        "[[callers]]\nname = \"{name}\"\ntoken_sha256 = \"{}\"\nnamespaces = [\"links\"]\nscopes = [\"lease\"]\n",
        digest_hex(secret)
    )
}

#[test]
fn a_good_file_yields_its_callers_with_scopes_namespaces_and_quotas() {
    let text = format!(
        "# comment\n{}\n[[callers]]\nname = \"billing\"\ntoken = \"{RAW}\"\nnamespaces = [\"*\"]\n\
         scopes = [\"allocate\", \"lookup\"]\nids_per_second = 500\nleases_per_second = 2\n",
        entry("shortener", "another-token-of-sufficient-length-42")
    );
    let specs = parse(&text).expect("valid");
    assert_eq!(specs.len(), 2);
    assert_eq!(specs[0].name.as_str(), "shortener");
    assert!(specs[0].scopes.contains(Scope::Lease));
    assert!(!specs[0].scopes.contains(Scope::Allocate));
    let links = Namespace::parse("links").expect("valid");
    let other = Namespace::parse("other").expect("valid");
    assert!(specs[0].namespaces.allows(&links) && !specs[0].namespaces.allows(&other));
    assert_eq!(specs[1].digest, token::digest(RAW.as_bytes()));
    assert!(specs[1].namespaces.allows(&other));
    assert_eq!(specs[1].quota.ids_per_second, NonZeroU32::new(500));
    assert_eq!(specs[1].quota.leases_per_second, NonZeroU32::new(2));
}

#[test]
fn every_broken_rule_refuses_the_whole_file_and_no_message_shows_a_token() {
    let good = entry("a", "token-number-one-which-is-long-enough");
    let with = |extra: &str| format!("{good}\n{extra}");
    let field = |body: &str| with(&format!("[[callers]]\nname = \"b\"\n{body}"));
    let ok_rest = "namespaces = [\"links\"]\nscopes = [\"lease\"]\n";
    let cases: Vec<(&str, String)> = vec![
        ("not TOML", format!("[[callers]\nname = \"{RAW}")),
        (
            "unterminated token string",
            "[[callers]]\ntoken = \"secret-token-value-that-is-long-xx".into(),
        ),
        ("no caller", "# nobody\n".into()),
        ("unknown top-level key", with("version = 2\n")),
        (
            "unknown field",
            field(&format!("token = \"{RAW}\"\n{ok_rest}tokn = 1\n")),
        ),
        (
            "duplicate name",
            with(&entry("a", "token-number-two-which-is-long-enough")),
        ),
        (
            "duplicate token",
            with(&entry("b", "token-number-one-which-is-long-enough")),
        ),
        (
            "short token",
            field(&format!("token = \"short\"\n{ok_rest}")),
        ),
        (
            "token with a space",
            field(&format!("token = \"{} x\"\n{ok_rest}", "a".repeat(40))),
        ),
        (
            "both token forms",
            field(&format!(
                "token = \"{RAW}\"\ntoken_sha256 = \"{}\"\n{ok_rest}",
                digest_hex(RAW)
            )),
        ),
        ("no token", field(ok_rest)),
        (
            "bad digest",
            field(&format!("token_sha256 = \"abcd\"\n{ok_rest}")),
        ),
        (
            "unknown scope",
            field(&format!(
                "token = \"{RAW}\"\nnamespaces = [\"links\"]\nscopes = [\"lease\", \"root\"]\n"
            )),
        ),
        (
            "no scope",
            field(&format!(
                "token = \"{RAW}\"\nnamespaces = [\"links\"]\nscopes = []\n"
            )),
        ),
        (
            "no namespace",
            field(&format!(
                "token = \"{RAW}\"\nnamespaces = []\nscopes = [\"lease\"]\n"
            )),
        ),
        (
            "bad namespace",
            field(&format!(
                "token = \"{RAW}\"\nnamespaces = [\"Links\"]\nscopes = [\"lease\"]\n"
            )),
        ),
        (
            "star among others",
            field(&format!(
                "token = \"{RAW}\"\nnamespaces = [\"*\", \"links\"]\nscopes = [\"lease\"]\n"
            )),
        ),
        (
            "bad caller name",
            with(&format!(
                "[[callers]]\nname = \"B/x\"\ntoken = \"{RAW}\"\n{ok_rest}"
            )),
        ),
        (
            "zero rate",
            field(&format!("token = \"{RAW}\"\n{ok_rest}ids_per_second = 0\n")),
        ),
        (
            "huge rate",
            field(&format!(
                "token = \"{RAW}\"\n{ok_rest}leases_per_second = 4000000000\n"
            )),
        ),
        (
            "burst without rate",
            field(&format!("token = \"{RAW}\"\n{ok_rest}ids_burst = 10\n")),
        ),
        (
            "negative rate",
            field(&format!(
                "token = \"{RAW}\"\n{ok_rest}ids_per_second = -1\n"
            )),
        ),
        (
            "token where a number goes",
            field(&format!(
                "token = \"{RAW}\"\n{ok_rest}ids_per_second = \"{RAW}\"\n"
            )),
        ),
    ];
    for (case, text) in cases {
        let error = parse(&text).expect_err(case).to_string();
        assert!(!error.is_empty(), "{case}");
        for secret in [
            RAW,
            "secret-token-value-that-is-long-xx",
            "token-number-one",
        ] {
            assert!(
                !error.contains(secret),
                "{case}: the message shows a token: {error}"
            );
        }
    }
}

#[test]
fn a_syntax_error_names_its_line_and_column() {
    let text = "[[callers]]\nname = \"a\"\nscopes = [lease]\n";
    let error = parse(text).expect_err("bare word").to_string();
    assert!(error.contains("line 3"), "{error}");
}

#[test]
fn an_oversized_or_missing_file_is_refused_unread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = dir.path().join("big.toml");
    std::fs::write(&big, vec![b'#'; MAX_FILE_BYTES as usize + 10]).expect("write");
    assert!(matches!(read(&big), Err(TokensFileError::Read(_))));
    assert!(matches!(
        read(&dir.path().join("missing.toml")),
        Err(TokensFileError::Read(_))
    ));
}
