//! Settings written with units: sizes (`240 MiB`) and spans of time (`20s`, `5m`, `2h`, `30d`).
//!
//! A time setting's name or help says its unit (`SHORTENER_CACHE_TTL` in seconds,
//! `SHORTENER_IMPORT_IDLE_MS` in milliseconds); a bare number is read in that unit, as it
//! always was, and a number with a unit of its own is converted, so `SHORTENER_DRAIN_TIMEOUT=20s`
//! and `SHORTENER_RELOAD_INTERVAL_MS=2s` mean what they say. A span that is not a whole number
//! of the setting's unit (`1500ms` for seconds) is refused rather than rounded.

use std::num::{NonZeroU32, NonZeroU64};

/// A size in bytes: a whole number, alone or followed by a binary unit (`KiB`, `MiB`, `GiB`, or
/// Kubernetes' `Ki`, `Mi`, `Gi`) or a decimal one (`kB`, `MB`, `GB`): `240 MiB`, as the README
/// writes the defaults, `240Mi` as a manifest would, `250 MB` as 250,000,000 bytes. A bare `M`
/// or `G` is refused: tools disagree on whether it means 10⁶ or 2²⁰, and the choice is the
/// operator's to write down.
pub(crate) fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let refusal = || {
        format!(
            "{text:?} is not a size: a number of bytes, or of KiB, MiB, GiB (also Ki, Mi, Gi) \
             or kB, MB, GB (decimal), as in 240 MiB"
        )
    };
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "ki" => 1 << 10,
        "mib" | "mi" => 1 << 20,
        "gib" | "gi" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => return Err(refusal()),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(refusal)
}

/// A time setting in milliseconds (`2000`, `2s`).
pub(crate) fn millis<T: FromSpan>(text: &str) -> Result<T, String> {
    span(text, 1, "milliseconds")
}

/// A time setting in seconds (`60`, `1m`).
pub(crate) fn seconds<T: FromSpan>(text: &str) -> Result<T, String> {
    span(text, 1000, "seconds")
}

/// A time setting in days (`30`, `30d`).
pub(crate) fn days<T: FromSpan>(text: &str) -> Result<T, String> {
    span(text, 86_400_000, "days")
}

/// `text` as a whole number of units of `unit_ms` milliseconds each, named `unit`.
fn span<T: FromSpan>(text: &str, unit_ms: u64, unit: &str) -> Result<T, String> {
    let text = text.trim();
    let shape = || {
        format!(
            "not a span of time: a number of {unit}, or one with a unit (250ms, 20s, 5m, 2h, 1d)"
        )
    };
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(digits);
    let suffix_ms: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" => unit_ms,
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(shape()),
    };
    if number.is_empty() {
        return Err(shape());
    }
    let too_long = || format!("too long: more {unit} than this setting holds");
    let total_ms = number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(suffix_ms))
        .ok_or_else(too_long)?;
    if total_ms % unit_ms != 0 {
        return Err(format!("not a whole number of {unit}"));
    }
    T::from_span(total_ms / unit_ms).ok_or_else(|| match total_ms {
        0 => "must be more than 0".to_string(),
        _ => too_long(),
    })
}

/// The integer types a time setting is held in.
pub(crate) trait FromSpan: Sized {
    /// `units` as `Self`, `None` where it does not fit (0 in a non-zero type).
    fn from_span(units: u64) -> Option<Self>;
}

impl FromSpan for u64 {
    fn from_span(units: u64) -> Option<Self> {
        Some(units)
    }
}

impl FromSpan for u32 {
    fn from_span(units: u64) -> Option<Self> {
        u32::try_from(units).ok()
    }
}

impl FromSpan for NonZeroU64 {
    fn from_span(units: u64) -> Option<Self> {
        NonZeroU64::new(units)
    }
}

impl FromSpan for NonZeroU32 {
    fn from_span(units: u64) -> Option<Self> {
        NonZeroU32::new(u32::try_from(units).ok()?)
    }
}

#[cfg(test)]
mod tests {
    use std::num::{NonZeroU32, NonZeroU64};

    #[test]
    fn sizes_are_read_in_bytes_or_binary_or_decimal_units() {
        for (text, bytes) in [
            ("251658240", Some(251_658_240)),
            ("240 MiB", Some(240 << 20)),
            ("240MiB", Some(240 << 20)),
            ("4 kib", Some(4096)),
            ("1 GiB", Some(1 << 30)),
            ("240Mi", Some(240 << 20)),
            ("4Ki", Some(4096)),
            ("2 Gi", Some(2 << 30)),
            ("250 MB", Some(250_000_000)),
            ("64mb", Some(64_000_000)),
            ("8 kB", Some(8_000)),
            ("1GB", Some(1_000_000_000)),
            ("240 M", None),
            ("240G", None),
            ("240 MiBs", None),
            ("1.5 GiB", None),
            ("MiB", None),
            ("-1", None),
            ("99999999999999 GiB", None),
        ] {
            assert_eq!(super::parse_bytes(text).ok(), bytes, "{text}");
        }
    }

    /// A bare number keeps the setting's own unit; a unit of the text's own converts; what
    /// would need rounding, does not fit or is no span at all is refused, saying why.
    #[test]
    fn spans_of_time_are_read_in_the_settings_unit_or_their_own() {
        for (text, seconds) in [
            ("20", Ok(20)),
            ("20s", Ok(20)),
            (" 20 s ", Ok(20)),
            ("2m", Ok(120)),
            ("2H", Ok(7200)),
            ("1d", Ok(86_400)),
            ("3000ms", Ok(3)),
            ("0", Ok(0)),
            ("1500ms", Err("not a whole number of seconds")),
            ("20 sec", Err("not a span of time")),
            ("1.5s", Err("not a span of time")),
            ("-5", Err("not a span of time")),
            ("s", Err("not a span of time")),
            ("", Err("not a span of time")),
            ("99999999999999999999", Err("too long")),
            ("999999999999999999d", Err("too long")),
        ] {
            match (super::seconds::<u64>(text), seconds) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{text:?}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{text:?}: {got}"),
                (got, want) => panic!("{text:?}: {got:?}, expected {want:?}"),
            }
        }
        assert_eq!(super::millis::<u64>("2s"), Ok(2000));
        assert_eq!(super::millis::<u64>("250"), Ok(250));
        assert_eq!(super::days::<u32>("30"), Ok(30));
        assert_eq!(super::days::<u32>("48h"), Ok(2));
        assert!(
            super::days::<u32>("36h")
                .unwrap_err()
                .contains("whole number of days")
        );
        let zero = super::seconds::<NonZeroU64>("0ms").unwrap_err();
        assert!(zero.contains("more than 0"), "{zero}");
        assert!(super::days::<NonZeroU32>("0").is_err());
        let long = super::millis::<u32>("5000000000").unwrap_err();
        assert!(long.contains("too long"), "{long}");
    }
}
