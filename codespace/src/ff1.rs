//! FF1 (NIST SP 800-38G) as the code space uses it: AES-256, radix 62, an empty tweak, and
//! numeral strings of [`MIN_LENGTH`] to [`MAX_GENERATED_LENGTH`] digits held as integers.
//!
//! `fpe` computes the same permutation (the tests hold the two to each other for every length
//! and to NIST's samples through `fpe`), but its PRF clones the whole AES key schedule for each
//! of the ten rounds, a copy larger than the round's one AES block. With the tweak empty and
//! the radix fixed, the PRF's first block `P` depends only on the length, so its CBC-MAC state
//! is computed once per length when the code space is made, and each round is one AES block:
//! that state XOR `Q`, encrypted. Every half fits in 36 bits and every round's `S` in 12
//! bytes, so the arithmetic is `u128`.

use crate::space::{MAX_GENERATED_LENGTH, MIN_LENGTH};
use aes::Aes256;
use aes::cipher::{BlockCipherEncrypt, KeyInit};

/// FF1 with a fixed key, radix 62 and an empty tweak.
pub(crate) struct Ff1 {
    cipher: Aes256,
    /// `CIPH(P)` for each string length `n` (index `n`), the CBC-MAC state after `P`.
    after_p: [[u8; 16]; MAX_GENERATED_LENGTH + 1],
    /// `b` (step 3) and `d` (step 4) for each string length `n`.
    widths: [(usize, usize); MAX_GENERATED_LENGTH + 1],
}

/// `62^m` for every half length `m` (at most 6) and string length (at most 11).
const POWERS: [u128; MAX_GENERATED_LENGTH + 1] = {
    let mut powers = [1u128; MAX_GENERATED_LENGTH + 1];
    let mut m = 1;
    while m <= MAX_GENERATED_LENGTH {
        powers[m] = powers[m - 1] * 62;
        m += 1;
    }
    powers
};

fn pow62(m: usize) -> u128 {
    POWERS[m]
}

/// `b` of step 3 for a half of `v` digits: `ceil(v * log2(62) / 8)`, as `fpe` computes it.
fn bytes_of(v: usize) -> usize {
    (v as f64 * 62f64.log2() / 8.0).ceil() as usize
}

impl Ff1 {
    /// FF1 under the 32-byte `key`.
    pub(crate) fn new(key: &[u8; 32]) -> Self {
        let cipher = Aes256::new(key.into());
        let mut after_p = [[0u8; 16]; MAX_GENERATED_LENGTH + 1];
        let mut widths = [(0, 0); MAX_GENERATED_LENGTH + 1];
        for (n, width) in widths.iter_mut().enumerate() {
            let b = bytes_of(n - n / 2);
            *width = (b, 4 * b.div_ceil(4) + 4);
        }
        for (n, state) in after_p.iter_mut().enumerate().skip(MIN_LENGTH) {
            // P = [1, 2, 1] || [radix]^3 || [10] || [u mod 256] || [n]^4 || [t]^4, with t = 0.
            let mut p = [1, 2, 1, 0, 0, 62, 10, (n / 2) as u8, 0, 0, 0, 0, 0, 0, 0, 0];
            p[8..12].copy_from_slice(&(n as u32).to_be_bytes());
            let mut block = aes::Block::from(p);
            cipher.encrypt_block(&mut block);
            state.copy_from_slice(&block);
        }
        Self {
            cipher,
            after_p,
            widths,
        }
    }

    /// `NUM(S) mod 62^m` for round `i` of a string of `n` digits whose round input is `x`.
    fn round(&self, n: usize, i: u8, x: u128, m: usize) -> u128 {
        let (b, d) = self.widths[n];
        // Q = [0]^(16 - 1 - b) || [i] || [NUM(x)]^b: one block, since b <= 5.
        let mut q = [0u8; 16];
        q[15 - b] = i;
        q[16 - b..].copy_from_slice(&x.to_be_bytes()[16 - b..]);
        let mut block = aes::Block::default();
        for ((out, state), q) in block.iter_mut().zip(&self.after_p[n]).zip(q) {
            *out = state ^ q;
        }
        self.cipher.encrypt_block(&mut block);
        // S is R's first d bytes (d <= 12 < 16: no further blocks).
        let mut s = [0u8; 16];
        s[16 - d..].copy_from_slice(&block[..d]);
        u128::from_be_bytes(s) % pow62(m)
    }

    /// Encrypts the `n`-digit string whose value is `x` (below `62^n`).
    pub(crate) fn encrypt(&self, x: u128, n: usize) -> u128 {
        let (u, v) = (n / 2, n - n / 2);
        let (mut a, mut b) = (x / pow62(v), x % pow62(v));
        for i in 0..10u8 {
            let m = if i % 2 == 0 { u } else { v };
            let c = (a + self.round(n, i, b, m)) % pow62(m);
            (a, b) = (b, c);
        }
        a * pow62(v) + b
    }

    /// Decrypts the `n`-digit string whose value is `x` (below `62^n`).
    pub(crate) fn decrypt(&self, x: u128, n: usize) -> u128 {
        let (u, v) = (n / 2, n - n / 2);
        let (mut a, mut b) = (x / pow62(v), x % pow62(v));
        for i in (0..10u8).rev() {
            let m = if i % 2 == 0 { u } else { v };
            let modulus = pow62(m);
            let c = (b + modulus - self.round(n, i, a, m)) % modulus;
            (a, b) = (c, a);
        }
        a * pow62(v) + b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numeral::Numeral;
    use fpe::ff1::FF1;
    use proptest::prelude::*;

    proptest! {
        /// The same permutation as `fpe`'s FF1 (itself held to NIST's samples in `numeral`), for
        /// every length, random keys and values, both ways.
        #[test]
        fn agrees_with_fpe(
            key in prop::array::uniform32(any::<u8>()),
            n in MIN_LENGTH..=MAX_GENERATED_LENGTH,
            raw in any::<u128>(),
        ) {
            let x = raw % pow62(n);
            let theirs = FF1::<Aes256>::new(&key, 62)
                .expect("radix")
                .encrypt(&[], &Numeral::new(x, n, 62).expect("fits"))
                .expect("encrypt")
                .value();
            let ours = Ff1::new(&key);
            prop_assert_eq!(ours.encrypt(x, n), theirs);
            prop_assert_eq!(ours.decrypt(theirs, n), x);
        }
    }

    #[test]
    fn the_half_widths_fit_one_block() {
        for n in MIN_LENGTH..=MAX_GENERATED_LENGTH {
            let b = bytes_of(n - n / 2);
            assert!(b <= 12 && 4 * b.div_ceil(4) + 4 <= 16, "n = {n}: b = {b}");
        }
    }
}
