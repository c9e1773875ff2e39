//! A uniform sample of the codes loaded so far (reservoir sampling), from which each cache-miss
//! measurement takes codes no earlier measurement requested.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;

/// Up to `capacity` codes, each loaded code equally likely to be among them.
#[derive(Debug)]
pub struct Sample {
    codes: Vec<String>,
    capacity: usize,
    seen: u64,
    used: HashSet<String>,
    rng: StdRng,
}

impl Default for Sample {
    fn default() -> Sample {
        Sample::new(0, 0)
    }
}

impl Sample {
    /// An empty sample of at most `capacity` codes.
    pub fn new(capacity: usize, seed: u64) -> Sample {
        Sample {
            codes: Vec::with_capacity(capacity),
            capacity,
            seen: 0,
            used: HashSet::new(),
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// Offers one more loaded code.
    pub fn offer(&mut self, code: &str) {
        self.seen += 1;
        if self.codes.len() < self.capacity {
            self.codes.push(code.to_string());
        } else if self.capacity > 0 {
            let j = self.rng.random_range(0..self.seen);
            if (j as usize) < self.capacity && !self.used.contains(&self.codes[j as usize]) {
                self.codes[j as usize] = code.to_string();
            }
        }
    }

    /// Up to `n` sampled codes never returned before, in random order.
    pub fn fresh(&mut self, n: usize) -> Vec<String> {
        let mut unused: Vec<&String> = self
            .codes
            .iter()
            .filter(|c| !self.used.contains(*c))
            .collect();
        unused.shuffle(&mut self.rng);
        let picked: Vec<String> = unused.into_iter().take(n).cloned().collect();
        self.used.extend(picked.iter().cloned());
        picked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_codes_are_never_handed_out_twice() {
        let mut s = Sample::new(100, 1);
        for i in 0..10_000 {
            s.offer(&format!("c{i}"));
        }
        let a = s.fresh(60);
        let b = s.fresh(60);
        assert_eq!(a.len(), 60);
        assert_eq!(b.len(), 40, "only 40 of the 100 are left");
        assert!(a.iter().all(|c| !b.contains(c)));
        // Later codes may replace unused ones only.
        for i in 10_000..20_000 {
            s.offer(&format!("c{i}"));
        }
        assert!(
            s.fresh(100)
                .iter()
                .all(|c| !a.contains(c) && !b.contains(c))
        );
    }
}
