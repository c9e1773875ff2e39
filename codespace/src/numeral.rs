//! A numeral string held as one integer, for the `fpe` crate's FF1: in tests only, where `fpe`
//! and NIST's samples check this crate's own rounds (`ff1`). It was the code space's numeral
//! string until those rounds replaced `fpe`'s, whose PRF clones the key schedule every round.
//!
//! `fpe` runs FF1 over any [`NumeralString`]. Its general-purpose one keeps a `Vec` of digits and
//! does every round's arithmetic in `BigUint`: converting digits to a big integer, adding the
//! round's PRF output, reducing modulo `radix^m` and converting back, with a few heap
//! allocations each time. Codes are at most 11 base-62 digits (the whole string below `2^66`,
//! each half below `2^36`), so all of that fits in machine integers: this type keeps the string
//! as its value and length, splits it into halves with one division, and does each round in
//! `u128`. The FF1 algorithm itself (the AES-CBC-MAC PRF, the ten rounds) is still `fpe`'s.

use fpe::ff1::{NumeralString, Operations};

/// A numeral string of `len` digits in base `radix`, most significant first, held as its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Numeral {
    value: u128,
    len: usize,
    radix: u32,
}

/// One half of a [`Numeral`] during the FF1 rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Half {
    value: u128,
    len: usize,
    radix: u32,
}

/// `radix^len`, if it fits in a `u128`.
fn power(radix: u32, len: usize) -> Option<u128> {
    u128::from(radix).checked_pow(u32::try_from(len).ok()?)
}

impl Numeral {
    /// The numeral string of `len` digits in base `radix` whose value is `value`. `None` if
    /// `value` needs more digits, or if `radix^len` does not fit in a `u128` (the rounds rely
    /// on it).
    pub(crate) fn new(value: u128, len: usize, radix: u32) -> Option<Self> {
        (value < power(radix, len)?).then_some(Self { value, len, radix })
    }

    /// The value of the whole string.
    pub(crate) fn value(&self) -> u128 {
        self.value
    }
}

impl NumeralString for Numeral {
    type Ops = Half;

    fn is_valid(&self, radix: u32) -> bool {
        radix == self.radix && power(radix, self.len).is_some_and(|limit| self.value < limit)
    }

    fn numeral_count(&self) -> usize {
        self.len
    }

    fn split(&self) -> (Half, Half) {
        let u = self.len / 2;
        let v = self.len - u;
        let low = power(self.radix, v).expect("a half of a valid numeral fits");
        (
            Half {
                value: self.value / low,
                len: u,
                radix: self.radix,
            },
            Half {
                value: self.value % low,
                len: v,
                radix: self.radix,
            },
        )
    }

    fn concat(a: Half, b: Half) -> Self {
        let low = power(a.radix, b.len).expect("a half of a valid numeral fits");
        Self {
            value: a.value * low + b.value,
            len: a.len + b.len,
            radix: a.radix,
        }
    }
}

/// A big-endian byte string of at most 16 bytes.
pub(crate) struct BeBytes {
    buf: [u8; 16],
    start: usize,
}

impl AsRef<[u8]> for BeBytes {
    fn as_ref(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

impl Half {
    /// `NUM(bytes) mod radix^m`, read big-endian.
    fn reduce(bytes: impl Iterator<Item = u8>, modulus: u128) -> u128 {
        // FF1 asks for d = 4 * ceil(b / 4) + 4 bytes, where b is the byte length of a half.
        // A half is below radix^ceil(len / 2) <= 2^72 for a string below 2^128, so b <= 9 and
        // d <= 12: the bytes fit a u128 as they are and need one (128-bit, slow) division,
        // not one per byte.
        let (value, count) = bytes.fold((0u128, 0usize), |(acc, count), byte| {
            (acc << 8 | u128::from(byte), count + 1)
        });
        assert!(
            count <= 16,
            "FF1 asked for {count} bytes; at most 12 fit a half"
        );
        value % modulus
    }

    fn modulus(radix: u32, m: usize) -> u128 {
        power(radix, m).expect("a half of a valid numeral fits")
    }
}

impl Operations for Half {
    type Bytes = BeBytes;

    fn numeral_count(&self) -> usize {
        self.len
    }

    fn to_be_bytes(&self, _radix: u32, b: usize) -> BeBytes {
        assert!(
            b <= 16,
            "a half below 2^128 needs at most 16 bytes, not {b}"
        );
        BeBytes {
            buf: self.value.to_be_bytes(),
            start: 16 - b,
        }
    }

    fn add_mod_exp(self, other: impl Iterator<Item = u8>, radix: u32, m: usize) -> Self {
        let modulus = Self::modulus(radix, m);
        let y = Self::reduce(other, modulus);
        Self {
            value: (self.value % modulus + y) % modulus,
            len: m,
            radix,
        }
    }

    fn sub_mod_exp(self, other: impl Iterator<Item = u8>, radix: u32, m: usize) -> Self {
        let modulus = Self::modulus(radix, m);
        let y = Self::reduce(other, modulus);
        Self {
            value: (self.value % modulus + modulus - y) % modulus,
            len: m,
            radix,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fpe::ff1::{FF1, FlexibleNumeralString};
    use proptest::prelude::*;

    fn digits(value: u128, len: usize, radix: u32) -> Vec<u16> {
        let mut out = vec![0u16; len];
        let mut rest = value;
        for d in out.iter_mut().rev() {
            *d = (rest % u128::from(radix)) as u16;
            rest /= u128::from(radix);
        }
        out
    }

    fn value(digits: &[u16], radix: u32) -> u128 {
        digits
            .iter()
            .fold(0, |acc, &d| acc * u128::from(radix) + u128::from(d))
    }

    /// NIST SP 800-38G's AES-256 samples #7 to #9 (radix 10 and 36, with and without a tweak).
    #[test]
    fn matches_the_published_aes256_samples() {
        let key = hex::decode("2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F7F036D6F04FC6A94")
            .expect("hex");
        let samples: [(u32, &str, Vec<u16>, Vec<u16>); 3] = [
            (
                10,
                "",
                (0..10).collect(),
                vec![6, 6, 5, 7, 6, 6, 7, 0, 0, 9],
            ),
            (
                10,
                "39383736353433323130",
                (0..10).collect(),
                vec![1, 0, 0, 1, 6, 2, 3, 4, 6, 3],
            ),
            (
                36,
                "3737373770717273373737",
                (0..19).collect(),
                vec![
                    33, 28, 8, 10, 0, 10, 35, 17, 2, 10, 31, 34, 10, 21, 34, 35, 30, 32, 13,
                ],
            ),
        ];
        for (radix, tweak, plain, cipher) in samples {
            let ff1 = FF1::<aes::Aes256>::new(&key, radix).expect("radix");
            let tweak = hex::decode(tweak).expect("hex");
            let x = Numeral::new(value(&plain, radix), plain.len(), radix).expect("fits");
            let y = ff1.encrypt(&tweak, &x).expect("encrypt");
            assert_eq!(
                digits(y.value(), cipher.len(), radix),
                cipher,
                "radix {radix}"
            );
            assert_eq!(ff1.decrypt(&tweak, &y).expect("decrypt"), x);
        }
    }

    #[test]
    fn refuses_values_and_lengths_that_do_not_fit() {
        assert!(Numeral::new(62u128.pow(4), 4, 62).is_none());
        assert!(Numeral::new(62u128.pow(4) - 1, 4, 62).is_some());
        assert!(Numeral::new(0, 22, 62).is_none(), "62^22 > 2^128");
        assert!(Numeral::new(0, 21, 62).is_some());
        let n = Numeral::new(5, 4, 62).expect("fits");
        assert!(n.is_valid(62));
        assert!(!n.is_valid(10), "a numeral is valid only in its own radix");
    }

    proptest! {
        /// The same permutation as `fpe`'s own digit-vector numeral string, for every code
        /// length and random keys, values and tweaks.
        #[test]
        fn agrees_with_the_digit_vector_numeral_string(
            key in prop::array::uniform32(any::<u8>()),
            len in 4usize..=11,
            raw in any::<u128>(),
            tweak in prop::collection::vec(any::<u8>(), 0..4),
        ) {
            let ff1 = FF1::<aes::Aes256>::new(&key, 62).expect("radix");
            let x = raw % 62u128.pow(len as u32);
            let ours = ff1.encrypt(&tweak, &Numeral::new(x, len, 62).expect("fits")).expect("encrypt");
            let theirs: Vec<u16> = ff1
                .encrypt(&tweak, &FlexibleNumeralString::from(digits(x, len, 62)))
                .expect("encrypt")
                .into();
            prop_assert_eq!(digits(ours.value(), len, 62), theirs);
            prop_assert_eq!(ff1.decrypt(&tweak, &ours).expect("decrypt").value(), x);
        }
    }
}
