//! Whole-domain and statistical checks of the code space (invariant I4).

use codespace::{CodeKey, CodeSpace, digit_value, pow62};

fn space(length: usize) -> CodeSpace {
    CodeSpace::new(&CodeKey::from_bytes([7u8; 32]), length).expect("valid length")
}

fn code_value(code: &str) -> u64 {
    code.bytes()
        .map(|b| u64::from(digit_value(b).expect("base62")))
        .fold(0, |acc, d| acc * 62 + d)
}

/// Every ID of the smallest space (L = 4, 62^4 = 14,776,336 IDs) through the same `encode` path:
/// no two IDs share a code, so the map is a bijection onto the 4-character codes. Sampled IDs
/// also decode back.
#[test]
fn encode_is_a_bijection_on_the_whole_l4_space() {
    let space = space(4);
    let size = u64::try_from(pow62(4)).expect("fits");
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4) as u64;
    let chunk = size.div_ceil(threads);
    let codes: Vec<Vec<u32>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let space = &space;
                scope.spawn(move || {
                    (t * chunk..((t + 1) * chunk).min(size))
                        .map(|id| {
                            let code = space.encode(id);
                            assert_eq!(code.len(), 4, "id {id} gave {code}");
                            if id % 9973 == 0 {
                                assert_eq!(space.decode(&code), Ok(id));
                            }
                            code_value(&code) as u32
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker"))
            .collect()
    });
    let mut seen = vec![0u64; (size as usize).div_ceil(64)];
    let mut count = 0u64;
    for value in codes.into_iter().flatten() {
        let (word, bit) = (value as usize / 64, value % 64);
        assert_eq!(
            seen[word] & (1 << bit),
            0,
            "code value {value} produced twice"
        );
        seen[word] |= 1 << bit;
        count += 1;
    }
    assert_eq!(count, size);
}

/// A million consecutive IDs give a million distinct codes whose order says nothing about the
/// IDs: Spearman's rank correlation is near 0 and the first character is close to uniform.
#[test]
fn consecutive_ids_give_codes_with_no_visible_order() {
    const N: u64 = 1_000_000;
    let space = space(7);
    let base = 1_000_000_000u64; // a realistic point in the sequence, not just the start
    let values: Vec<u64> = (base..base + N)
        .map(|id| code_value(&space.encode(id)))
        .collect();

    let mut sorted = values.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(
        sorted.len() as u64,
        N,
        "duplicate codes among consecutive IDs"
    );

    // IDs are already in rank order 0..N; rank the codes.
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_unstable_by_key(|&i| values[i]);
    let mut sum_d2 = 0f64;
    for (rank, &i) in order.iter().enumerate() {
        let d = rank as f64 - i as f64;
        sum_d2 += d * d;
    }
    let n = N as f64;
    let rho = 1.0 - 6.0 * sum_d2 / (n * (n * n - 1.0));
    // Under independence rho has standard deviation 1/sqrt(N-1) = 0.001.
    assert!(rho.abs() < 0.005, "rank correlation {rho}");

    // First character: chi-square over 62 buckets (61 degrees of freedom; p = 0.001 is ~100).
    let mut buckets = [0u64; 62];
    for v in &values {
        buckets[(v / u64::try_from(pow62(6)).expect("fits")) as usize] += 1;
    }
    let expected = n / 62.0;
    let chi2: f64 = buckets
        .iter()
        .map(|&c| (c as f64 - expected).powi(2) / expected)
        .sum();
    assert!(
        chi2 < 110.0,
        "first character far from uniform: chi2 = {chi2}, {buckets:?}"
    );

    // Neighbours look unrelated: consecutive IDs rarely share a first character (1/62 by chance).
    let same_first = values
        .windows(2)
        .filter(|w| w[0] / 62u64.pow(6) == w[1] / 62u64.pow(6))
        .count();
    assert!(
        (same_first as f64) < n / 62.0 * 1.2,
        "{same_first} neighbours share a first character"
    );
}
