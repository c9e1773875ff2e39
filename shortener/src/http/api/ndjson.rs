//! A link as one line of an NDJSON export, written straight into the response's buffer.
//!
//! The line is byte for byte what serializing [`LinkJson`](super::wire::LinkJson) gives (the
//! tests hold the two together). Written by hand it costs no allocation per link (the short
//! URL and the times go straight into the buffer), and a string with nothing to escape (codes,
//! names and URLs nearly always) is copied as it is instead of byte by byte.

use crate::domain::{Link, PublicBase};
use chrono::{DateTime, Datelike, SecondsFormat, Timelike, Utc};

/// Appends `link` as shown under `public`, its state as of `now`, to `out` (without the line
/// break).
pub(super) fn link_line(out: &mut Vec<u8>, public: &PublicBase, link: &Link, now: DateTime<Utc>) {
    out.extend_from_slice(b"{\"code\":");
    string(out, &link.code);
    out.extend_from_slice(b",\"short_url\":\"");
    escaped(out, public.as_str());
    escaped(out, &link.code);
    out.extend_from_slice(b"\",\"url\":");
    string(out, &link.url);
    out.extend_from_slice(b",\"tenant\":");
    string(out, &link.tenant);
    out.extend_from_slice(b",\"owner\":");
    string(out, &link.owner);
    out.extend_from_slice(b",\"state\":\"");
    out.extend_from_slice(link.state(now).name().as_bytes());
    out.extend_from_slice(b"\",\"created_at\":");
    time(out, link.created_at);
    for (name, t) in [
        (&b",\"expires_at\":"[..], link.expires_at),
        (b",\"deleted_at\":", link.deleted_at),
        (b",\"disabled_at\":", link.disabled_at),
    ] {
        out.extend_from_slice(name);
        match t {
            Some(t) => time(out, t),
            None => out.extend_from_slice(b"null"),
        }
    }
    out.extend_from_slice(b",\"max_visits\":");
    match link.max_visits {
        Some(n) => number(out, n),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"tags\":[");
    for (i, tag) in link.tags.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, tag);
    }
    out.extend_from_slice(b"],\"imported\":");
    boolean(out, link.import_batch.is_some());
    out.extend_from_slice(b",\"protected\":");
    boolean(out, link.password.is_some());
    out.extend_from_slice(b",\"clicks\":{\"human\":");
    number(out, link.clicks.human);
    out.extend_from_slice(b",\"head\":");
    number(out, link.clicks.head);
    out.extend_from_slice(b",\"bot\":");
    number(out, link.clicks.bot);
    out.extend_from_slice(b"}}");
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    escaped(out, s);
    out.push(b'"');
}

/// `s` as the inside of a JSON string, escaped as serde_json escapes it (control characters,
/// `"` and `\`; everything else as it is).
fn escaped(out: &mut Vec<u8>, s: &str) {
    // No early exit: the compiler checks many bytes at a time.
    let plain = s.bytes().fold(true, |plain, b| {
        plain & (b >= 0x20) & (b != b'"') & (b != b'\\')
    });
    if plain {
        out.extend_from_slice(s.as_bytes());
    } else {
        let quoted = serde_json::to_string(s).unwrap_or_default();
        out.extend_from_slice(
            quoted
                .strip_prefix('"')
                .and_then(|q| q.strip_suffix('"'))
                .unwrap_or_default()
                .as_bytes(),
        );
    }
}

/// `t` as a JSON string, `YYYY-MM-DDTHH:MM:SS.mmmZ` (RFC 3339 to the millisecond, as the API
/// shows every time).
fn time(out: &mut Vec<u8>, t: DateTime<Utc>) {
    let year = t.year();
    if !(0..=9999).contains(&year) || t.nanosecond() >= 1_000_000_000 {
        // Outside four-digit years, or a leap second: as chrono writes it.
        return string(out, &t.to_rfc3339_opts(SecondsFormat::Millis, true));
    }
    let mut text = *b"\"0000-00-00T00:00:00.000Z\"";
    for (range, value) in [
        (1..5, year as u32),
        (6..8, t.month()),
        (9..11, t.day()),
        (12..14, t.hour()),
        (15..17, t.minute()),
        (18..20, t.second()),
        (21..24, t.nanosecond() / 1_000_000),
    ] {
        let mut value = value;
        for digit in text[range].iter_mut().rev() {
            *digit = b'0' + (value % 10) as u8;
            value /= 10;
        }
    }
    out.extend_from_slice(&text);
}

fn number(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[start..]);
}

fn boolean(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

#[cfg(test)]
mod tests {
    use super::super::wire::LinkJson;
    use super::*;
    use crate::domain::{ClickCounts, PasswordHash};
    use chrono::TimeZone;

    fn link() -> Link {
        Link {
            code: "abc1234".into(),
            tenant: "acme".into(),
            owner: "ci".into(),
            url: "https://example.com/a?b=c".into(),
            created_at: Utc.timestamp_millis_opt(1_700_000_000_123).unwrap(),
            expires_at: None,
            deleted_at: None,
            disabled_at: None,
            max_visits: None,
            tags: Vec::new(),
            import_batch: None,
            password: None,
            clicks: ClickCounts::default(),
        }
    }

    #[test]
    fn lines_are_what_serde_writes_for_the_link() {
        let public = PublicBase::new("https://s.test/");
        let now = Utc.timestamp_millis_opt(1_750_000_000_000).unwrap();
        let at = |ms: i64| Some(Utc.timestamp_millis_opt(ms).unwrap());
        let links = [
            link(),
            Link {
                url: "https://example.com/\"quoted\"\\back\u{1}\tcontrol/ünï/\u{7f}".into(),
                tenant: "t\"en".into(),
                tags: vec!["a".into(), "b\"c".into(), "日本".into()],
                max_visits: Some(18_446_744_073_709_551_615),
                expires_at: at(1_600_000_000_000),
                import_batch: Some(7),
                password: Some(PasswordHash::from_stored("$argon2id$x".into())),
                clicks: ClickCounts {
                    human: 1,
                    head: 20,
                    bot: 300,
                },
                ..link()
            },
            Link {
                created_at: Utc.timestamp_millis_opt(0).unwrap(),
                expires_at: at(253_402_300_799_999),
                disabled_at: at(1_000),
                max_visits: Some(0),
                ..link()
            },
            Link {
                deleted_at: at(1_800_000_000_009),
                expires_at: at(1_900_000_000_000),
                ..link()
            },
            Link {
                created_at: Utc.with_ymd_and_hms(12_000, 1, 2, 3, 4, 5).unwrap(),
                ..link()
            },
        ];
        for link in &links {
            let mut ours = Vec::new();
            link_line(&mut ours, &public, link, now);
            let theirs = serde_json::to_vec(&LinkJson::at(&public, link, now)).expect("serializes");
            assert_eq!(
                String::from_utf8(ours).expect("UTF-8"),
                String::from_utf8(theirs).expect("UTF-8")
            );
        }
    }
}
