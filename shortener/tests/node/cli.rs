//! The operator CLI (`shortener keygen`, `shortener codes encode|decode`) as a user runs it.

use std::io::Write;
use std::process::{Command, Output, Stdio};

pub(crate) fn shortener(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shortener"))
        .args(args)
        .env_remove("SHORTENER_KEY_FILE")
        .env_remove("SHORTENER_CODE_LENGTH")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start shortener");
    let mut input = child.stdin.take().expect("stdin");
    let stdin = stdin.to_string();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(stdin.as_bytes());
    });
    let output = child.wait_with_output().expect("wait");
    writer.join().expect("writer");
    output
}

fn keygen(dir: &std::path::Path) -> String {
    let path = dir.join("code.key");
    let out = shortener(&["keygen", "--out", path.to_str().expect("utf8")], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path.to_str().expect("utf8").to_string()
}

fn lines(out: &Output) -> Vec<String> {
    String::from_utf8(out.stdout.clone())
        .expect("utf8")
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn encode_then_decode_through_stdin_gives_back_the_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = keygen(dir.path());
    let encoded = shortener(&["codes", "encode", "--key-file", &key], "0\n1\n2\n");
    assert!(
        encoded.status.success(),
        "{}",
        String::from_utf8_lossy(&encoded.stderr)
    );
    let codes = lines(&encoded);
    assert_eq!(codes.len(), 3);
    for code in &codes {
        assert_eq!(code.len(), 7, "{code}");
        assert!(code.bytes().all(|b| b.is_ascii_alphanumeric()), "{code}");
    }
    assert!(codes[0] != codes[1] && codes[1] != codes[2] && codes[0] != codes[2]);

    let decoded = shortener(
        &["codes", "decode", "--key-file", &key],
        &format!("{}\n", codes.join("\n")),
    );
    assert!(
        decoded.status.success(),
        "{}",
        String::from_utf8_lossy(&decoded.stderr)
    );
    assert_eq!(lines(&decoded), ["0", "1", "2"]);

    // Arguments instead of stdin, and another length.
    let args = shortener(
        &[
            "codes",
            "encode",
            "--key-file",
            &key,
            "--length",
            "9",
            "5",
            "6",
        ],
        "",
    );
    assert!(
        lines(&args).iter().all(|c| c.len() == 9),
        "{:?}",
        lines(&args)
    );
}

#[test]
fn a_hundred_thousand_piped_ids_give_distinct_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = keygen(dir.path());
    let input: String = (0..100_000).map(|i| format!("{i}\n")).collect();
    let out = shortener(&["codes", "encode", "--key-file", &key], &input);
    assert!(out.status.success());
    let mut codes = lines(&out);
    assert_eq!(codes.len(), 100_000);
    codes.sort();
    codes.dedup();
    assert_eq!(codes.len(), 100_000);
}

#[test]
fn bad_input_names_the_item_and_exits_non_zero() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = keygen(dir.path());
    let short_key = dir.path().join("short.key");
    std::fs::write(&short_key, "abcd").expect("write");
    let short_key = short_key.to_str().expect("utf8");
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["codes", "encode", "--key-file", &key],
            "1\nten\n",
            "\"ten\" (line 2)",
        ),
        (
            &["codes", "encode", "--key-file", &key, "-5"],
            "",
            "unexpected argument",
        ),
        (
            &[
                "codes",
                "encode",
                "--key-file",
                &key,
                "18446744073709551616",
            ],
            "",
            "\"18446744073709551616\"",
        ),
        (
            &["codes", "decode", "--key-file", &key, "abc-def"],
            "",
            "not base62",
        ),
        (
            &["codes", "decode", "--key-file", &key, "abc"],
            "",
            "\"abc\"",
        ),
        (
            &["codes", "decode", "--key-file", &key],
            "abcdefghijklm\n",
            "line 1",
        ),
        (
            &["codes", "encode", "--key-file", short_key, "1"],
            "",
            "2 bytes",
        ),
        (
            &["codes", "encode", "--key-file", "/nonexistent/key", "1"],
            "",
            "/nonexistent/key",
        ),
        (
            &["codes", "encode", "--key-file", &key, "--length", "3", "1"],
            "",
            "code length 3",
        ),
        (&["keygen", "--out", &key], "", "already exists"),
    ];
    for (args, stdin, want) in cases {
        let out = shortener(args, stdin);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(
            stderr.contains(want),
            "{args:?}: stderr {stderr:?} lacks {want:?}"
        );
    }
}

#[cfg(unix)]
#[test]
fn keygen_writes_an_owner_only_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let key = keygen(dir.path());
    let mode = std::fs::metadata(&key).expect("stat").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let text = std::fs::read_to_string(&key).expect("read");
    assert_eq!(text.trim().len(), 64);
}

/// The lines of `text` under the heading `heading` (up to the next blank-line-separated
/// heading).
fn section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| *l != heading)
        .skip(1)
        .take_while(|l| l.is_empty() || l.starts_with(' '))
        .filter(|l| l.trim_start().starts_with('-'))
        .collect()
}

#[test]
fn every_commands_help_is_grouped_under_headings_with_an_example() {
    for command in [
        &["--help"][..],
        &["serve", "--help"],
        &["migrate", "--help"],
        &["codes", "--help"],
        &["codes", "encode", "--help"],
        &["codes", "decode", "--help"],
        &["keygen", "--help"],
        &["keys", "--help"],
        &["keys", "add", "--help"],
        &["keys", "yourls-token", "--help"],
        &["layout", "--help"],
    ] {
        let out = shortener(command, "");
        assert!(out.status.success(), "{command:?}");
        let help = String::from_utf8(out.stdout).expect("utf-8");
        assert!(
            help.contains("\nExample"),
            "{command:?} shows no example:\n{help}"
        );
    }
    let out = shortener(&["serve", "-h"], "");
    let help = String::from_utf8(out.stdout).expect("utf-8");
    // Every serve setting sits under a heading of its part; only -h is left under Options.
    assert_eq!(
        section(&help, "Options:"),
        ["  -h, --help  Print help (see more with '--help')"]
    );
    let headings = [
        "Listeners and connections:",
        "Storage:",
        "IDs and codes:",
        "Access:",
        "Redirects and targets:",
        "Clicks and analytics:",
        "Webhooks:",
        "Limits:",
        "Compatibility:",
        "Logging:",
    ];
    let grouped: usize = headings.iter().map(|h| section(&help, h).len()).sum();
    for heading in headings {
        assert!(!section(&help, heading).is_empty(), "{heading}\n{help}");
    }
    assert_eq!(
        grouped,
        help.matches("\n      --").count(),
        "a flag outside the headings:\n{help}"
    );
    assert!(
        section(&help, "Storage:")
            .iter()
            .any(|l| l.contains("--database-url"))
    );
}
