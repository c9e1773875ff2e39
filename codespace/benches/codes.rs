//! Encode and decode throughput of the code space, beside the `sqids` crate encoding the same
//! IDs in the same run (the obvious alternative a user would reach for).
//!
//! Run: `cargo bench -p codespace --bench codes`

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use codespace::{CodeKey, CodeSpace};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

const IDS: std::ops::Range<u64> = 1_000_000_000..1_000_001_000;

fn codes(c: &mut Criterion) {
    let space = CodeSpace::new(&CodeKey::from_bytes([42; 32]), 7).expect("valid length");
    let sqids = sqids::Sqids::builder()
        .min_length(7)
        .build()
        .expect("sqids");
    let codes: Vec<String> = IDS.map(|id| space.encode(id)).collect();
    let sqid_codes: Vec<String> = IDS.map(|id| sqids.encode(&[id]).expect("encode")).collect();

    let mut group = c.benchmark_group("codes");
    group.throughput(Throughput::Elements(IDS.count() as u64));
    group.bench_function("ff1_encode", |b| {
        b.iter(|| {
            for id in IDS {
                black_box(space.encode(black_box(id)));
            }
        })
    });
    group.bench_function("ff1_decode", |b| {
        b.iter(|| {
            for code in &codes {
                black_box(space.decode(black_box(code)).ok());
            }
        })
    });
    group.bench_function("sqids_encode", |b| {
        b.iter(|| {
            for id in IDS {
                black_box(sqids.encode(&[black_box(id)]).ok());
            }
        })
    });
    group.bench_function("sqids_decode", |b| {
        b.iter(|| {
            for code in &sqid_codes {
                black_box(sqids.decode(black_box(code)));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, codes);
criterion_main!(benches);
