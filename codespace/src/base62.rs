//! Fixed-length base62 over the alphabet `0-9A-Za-z` (byte order equals numeric order).

/// The 62 digits, in value order: `0-9`, then `A-Z`, then `a-z`.
pub const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The value of one base62 digit, or `None` for any other byte.
pub const fn digit_value(byte: u8) -> Option<u16> {
    match byte {
        b'0'..=b'9' => Some((byte - b'0') as u16),
        b'A'..=b'Z' => Some((byte - b'A') as u16 + 10),
        b'a'..=b'z' => Some((byte - b'a') as u16 + 36),
        _ => None,
    }
}

/// Writes `value` as exactly `len` base-62 characters, most significant first.
/// The caller guarantees `value < 62^len` and `len <= 22`.
pub(crate) fn render(value: u128, len: usize) -> String {
    let mut text = [b'0'; 22];
    let mut slots = text[..len].iter_mut().rev();
    // 128-bit division is a library call; below 2^64 (every code of up to 10 characters) the
    // digits come from plain 64-bit divisions.
    let mut wide = value;
    while wide > u128::from(u64::MAX) {
        let slot = slots.next().expect("value fits in len digits");
        *slot = ALPHABET[(wide % 62) as usize];
        wide /= 62;
    }
    let mut narrow = wide as u64;
    for slot in slots {
        *slot = ALPHABET[(narrow % 62) as usize];
        narrow /= 62;
    }
    debug_assert_eq!(narrow, 0, "value does not fit in {len} digits");
    text[..len].iter().map(|&b| b as char).collect()
}

/// The value of a base-62 text, most significant first, or the first character that is not a
/// base-62 digit and its position. The caller guarantees at most 21 characters (`62^21 < 2^128`).
pub(crate) fn parse(text: &str) -> Result<u128, (char, usize)> {
    text.chars()
        .enumerate()
        .try_fold(0u128, |acc, (position, character)| {
            let digit = u8::try_from(character)
                .ok()
                .and_then(digit_value)
                .ok_or((character, position))?;
            Ok(acc * 62 + u128::from(digit))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digit_values_follow_the_alphabet() {
        for (i, &b) in ALPHABET.iter().enumerate() {
            assert_eq!(digit_value(b), Some(i as u16));
        }
        for b in [b'-', b'_', b' ', b'/', 0u8, 0xff, b'{', b'@', b'[', b'`'] {
            assert_eq!(digit_value(b), None, "byte {b}");
        }
    }

    #[test]
    fn values_round_trip_at_fixed_length() {
        for (value, len) in [
            (0u128, 4),
            (61, 4),
            (62, 4),
            (62u128.pow(4) - 1, 4),
            (12345, 7),
            (u128::from(u64::MAX), 11),
            (u128::from(u64::MAX) + 1, 11),
            (62u128.pow(11) - 1, 11),
        ] {
            let text = render(value, len);
            assert_eq!(text.len(), len);
            assert_eq!(parse(&text), Ok(value));
        }
        assert_eq!(render(0, 4), "0000");
        assert_eq!(render(62u128.pow(4) - 1, 4), "zzzz");
        assert_eq!(render(62, 4), "0010");
        assert_eq!(render(62u128.pow(11) - 1, 11), "zzzzzzzzzzz");
        assert_eq!(parse("00-1"), Err(('-', 2)));
        assert_eq!(parse("é1"), Err(('é', 0)));
    }
}
