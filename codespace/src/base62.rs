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

/// Writes `value` as exactly `len` base-62 digit values, most significant first.
/// The caller guarantees `value < 62^len`.
pub(crate) fn to_digits(mut value: u128, len: usize) -> Vec<u16> {
    let mut digits = vec![0u16; len];
    for slot in digits.iter_mut().rev() {
        *slot = (value % 62) as u16;
        value /= 62;
    }
    debug_assert_eq!(value, 0, "value does not fit in {len} digits");
    digits
}

/// Reads digit values (each < 62), most significant first.
pub(crate) fn from_digits(digits: &[u16]) -> u128 {
    digits
        .iter()
        .fold(0u128, |acc, &d| acc * 62 + u128::from(d))
}

/// Renders digit values as text.
pub(crate) fn render(digits: &[u16]) -> String {
    digits
        .iter()
        .map(|&d| ALPHABET[usize::from(d)] as char)
        .collect()
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
    fn digits_round_trip_at_fixed_length() {
        for (value, len) in [
            (0u128, 4),
            (61, 4),
            (62, 4),
            (62u128.pow(4) - 1, 4),
            (12345, 7),
        ] {
            let digits = to_digits(value, len);
            assert_eq!(digits.len(), len);
            assert_eq!(from_digits(&digits), value);
        }
        assert_eq!(render(&to_digits(0, 4)), "0000");
        assert_eq!(render(&to_digits(62u128.pow(4) - 1, 4)), "zzzz");
    }
}
