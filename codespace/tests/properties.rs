//! Properties of the code space (invariant I4), checked through the public API.

use codespace::{CodeError, CodeKey, CodeSpace, MAX_GENERATED_LENGTH, MIN_LENGTH, pow62};
use proptest::prelude::*;

fn space(length: usize) -> CodeSpace {
    let key = CodeKey::parse("8c5e0a4fb2d1c3e7f9a0b1c2d3e4f5061728394a5b6c7d8e9f0a1b2c3d4e5f60")
        .expect("test key");
    CodeSpace::new(&key, length).expect("valid length")
}

fn is_base62(code: &str) -> bool {
    code.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// The IDs where lengths change: 0, 62^k - 1, 62^k for every k, and the top of u64.
fn edge_ids() -> Vec<u64> {
    let mut ids = vec![0, 1, u64::MAX, u64::MAX - 1];
    for k in 1..=MAX_GENERATED_LENGTH {
        for v in [pow62(k) - 1, pow62(k), pow62(k) + 1] {
            if let Ok(v) = u64::try_from(v) {
                ids.push(v);
            }
        }
    }
    ids
}

#[test]
fn edges_round_trip_with_the_expected_length() {
    for length in MIN_LENGTH..=MAX_GENERATED_LENGTH {
        let space = space(length);
        for id in edge_ids() {
            let code = space.encode(id);
            let want = (length..=MAX_GENERATED_LENGTH)
                .find(|&k| u128::from(id) < pow62(k))
                .expect("every u64 fits in 11 characters");
            assert_eq!(code.len(), want, "L={length} id={id} code={code}");
            assert!(is_base62(&code), "{code}");
            assert_eq!(
                space.decode(&code),
                Ok(id),
                "L={length} id={id} code={code}"
            );
        }
        if let Ok(top) = u64::try_from(pow62(length) - 1) {
            assert_eq!(space.encode(top).len(), length);
        }
    }
}

#[test]
fn lengths_outside_the_supported_range_are_refused() {
    let key = CodeKey::generate();
    for length in [0, 1, 3, MAX_GENERATED_LENGTH + 1, 64] {
        assert_eq!(
            CodeSpace::new(&key, length).err(),
            Some(CodeError::InvalidLength(length))
        );
    }
}

#[test]
fn malformed_codes_are_refused() {
    let space = space(7);
    let cases: &[(&str, CodeError)] = &[
        ("", CodeError::WrongLength { min: 7, got: 0 }),
        ("abc", CodeError::WrongLength { min: 7, got: 3 }),
        ("abcdef", CodeError::WrongLength { min: 7, got: 6 }),
        ("abcdefghijkl", CodeError::WrongLength { min: 7, got: 12 }),
        (
            "abc-efg",
            CodeError::BadCharacter {
                character: '-',
                position: 3,
            },
        ),
        (
            "abc_efg",
            CodeError::BadCharacter {
                character: '_',
                position: 3,
            },
        ),
        (
            "abcdef ",
            CodeError::BadCharacter {
                character: ' ',
                position: 6,
            },
        ),
        (
            "\u{e9}bcdefg",
            CodeError::BadCharacter {
                character: '\u{e9}',
                position: 0,
            },
        ),
        (
            "abc/efg",
            CodeError::BadCharacter {
                character: '/',
                position: 3,
            },
        ),
    ];
    for (code, want) in cases {
        assert_eq!(space.decode(code).as_ref().err(), Some(want), "{code:?}");
    }
}

#[test]
fn longer_codes_outside_their_id_range_are_refused() {
    // Exactly 1 in 62 of the 8-character codes decodes below 62^7 (those IDs have 7-character
    // codes), so a few hundred codes find some; each must be refused, never accepted as an ID.
    let space = space(7);
    let mut refused = 0;
    for n in 0u64..2000 {
        let code = format!("{:0>8}", codespace_digits(n * 7919));
        match space.decode(&code) {
            Ok(id) => {
                assert!(
                    u128::from(id) >= pow62(7),
                    "{code} decoded to short-space id {id}"
                );
                assert_eq!(space.encode(id), code);
            }
            Err(e) => {
                assert_eq!(e, CodeError::OutsideDomain);
                refused += 1;
            }
        }
    }
    assert!(
        refused > 0,
        "no 8-character code fell below 62^7 in 2000 tries"
    );
}

fn codespace_digits(mut n: u64) -> String {
    let mut out = Vec::new();
    while n > 0 {
        out.push(codespace::ALPHABET[(n % 62) as usize]);
        n /= 62;
    }
    out.reverse();
    String::from_utf8(out).expect("ascii")
}

#[test]
fn a_different_key_gives_different_codes() {
    let a = space(7);
    let b = CodeSpace::new(&CodeKey::generate(), 7).expect("valid");
    let same = (0..100u64)
        .filter(|&id| a.encode(id) == b.encode(id))
        .count();
    assert!(same < 3, "{same} of 100 codes equal under two keys");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_id_round_trips_at_a_fixed_length(id in any::<u64>(), length in MIN_LENGTH..=MAX_GENERATED_LENGTH) {
        let space = space(length);
        let code = space.encode(id);
        prop_assert!(is_base62(&code));
        prop_assert_eq!(code.len(), space.code_length(id));
        prop_assert!(code.len() >= length);
        prop_assert_eq!(space.decode(&code), Ok(id));
    }

    #[test]
    fn ids_in_the_base_space_give_codes_of_exactly_l(length in MIN_LENGTH..=10usize, frac in 0.0f64..1.0) {
        let space = space(length);
        let id = ((pow62(length) as f64 - 1.0) * frac) as u64;
        let code = space.encode(id);
        prop_assert_eq!(code.len(), length);
        prop_assert_eq!(space.decode(&code), Ok(id));
    }

    #[test]
    fn any_base62_code_of_length_l_decodes_to_an_id_that_encodes_back(code in "[0-9A-Za-z]{7}") {
        let space = space(7);
        let id = space.decode(&code).expect("every 7-character code is in the base space");
        prop_assert!(u128::from(id) < pow62(7));
        prop_assert_eq!(space.encode(id), code);
    }
}
