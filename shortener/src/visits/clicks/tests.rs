//! The click recorder's own tests: counts, keys, weights, takes and put-backs.

use super::*;

/// A key too long to be held inline (a branded host and alias) is weighed with its heap
/// bytes while pending, put back after a failed write as well, and not once taken.
#[test]
fn long_keys_are_weighed_with_their_heap_bytes() {
    let recorder = ClickRecorder::default();
    let slots = |r: &ClickRecorder| {
        r.shards.iter().map(|s| lock(s).capacity()).sum::<usize>() as u64 * SLOT_BYTES
    };
    let long = format!("{}.example/summer-sale", "brand".repeat(40));
    recorder.record("abc1234", VisitKind::Human);
    assert_eq!(
        recorder.bytes(),
        slots(&recorder),
        "an inline key has no heap"
    );
    recorder.record(&long, VisitKind::Human);
    recorder.record(&long, VisitKind::Bot);
    let heap = CompactCode::new(&long).heap_bytes() as u64;
    assert!(heap > long.len() as u64, "{heap}");
    assert_eq!(recorder.bytes(), slots(&recorder) + heap, "counted once");
    let taken = recorder.take();
    assert_eq!(recorder.bytes(), slots(&recorder), "taken, no longer held");
    recorder.restore(&taken);
    assert_eq!(recorder.bytes(), slots(&recorder) + heap, "put back");
}

/// Long keys ask for a flush once their heap bytes cross their share of the budget, well
/// before the map holds `max_pending` codes, so the gauge keeps to the budget whatever the
/// keys' length; the flush lets their bytes go.
#[tokio::test]
async fn long_keys_ask_for_a_flush_before_they_outgrow_the_budget() {
    let recorder = ClickRecorder::new(1024);
    let share = recorder.key_heap_share();
    let long = |n: usize| format!("{}.example/sale-{n}", "brand".repeat(50));
    let each = CompactCode::new(&long(0)).heap_bytes() as u64;
    let mut full = std::pin::pin!(recorder.full());
    let mut n = 0;
    while (n as u64 + 1) * each < share {
        recorder.record(&long(n), VisitKind::Human);
        n += 1;
    }
    assert!(n < 1024 / 4, "the share is crossed early ({n} codes)");
    assert!(
        futures::poll!(full.as_mut()).is_pending(),
        "no flush below the share ({n} codes, {} bytes of keys)",
        n as u64 * each
    );
    recorder.record(&long(n), VisitKind::Human);
    tokio::time::timeout(std::time::Duration::from_secs(5), full)
        .await
        .expect("crossing the share asks for a flush");
    assert!(
        recorder.bytes() <= recorder.budget(),
        "{} > {}",
        recorder.bytes(),
        recorder.budget()
    );
    recorder.take();
    assert_eq!(
        recorder.key_heap.load(Ordering::Relaxed),
        0,
        "taken, let go"
    );
}

#[test]
fn counts_accumulate_per_code() {
    let recorder = ClickRecorder::default();
    recorder.record("a", VisitKind::Human);
    recorder.record("a", VisitKind::Human);
    recorder.record("a", VisitKind::Bot);
    recorder.record("b", VisitKind::Head);
    // An alias too long for an inline key, and one sharing its first 22 bytes.
    let long = "c-an-alias-longer-than-an-inline-key";
    recorder.record(long, VisitKind::Human);
    recorder.record(long, VisitKind::Human);
    recorder.record(&long[..22], VisitKind::Bot);
    let batch = recorder.take();
    let codes: Vec<&str> = batch.iter().map(|(code, _)| code.as_str()).collect();
    assert_eq!(codes, ["a", "b", &long[..22], long], "sorted by code");
    assert_eq!((batch[2].1.human, batch[2].1.bot), (0, 1));
    assert_eq!((batch[3].1.human, batch[3].1.bot), (2, 0));
    assert_eq!(
        batch[0].1,
        ClickCounts {
            human: 2,
            head: 0,
            bot: 1
        }
    );
    assert_eq!(
        batch[1].1,
        ClickCounts {
            human: 0,
            head: 1,
            bot: 0
        }
    );
    recorder.restore(&batch);
    assert_eq!(recorder.take().len(), 4);
}

#[test]
fn a_chunk_in_doubt_counts_as_pending_until_it_is_known_written() {
    let recorder = ClickRecorder::default();
    for _ in 0..3 {
        recorder.record("b", VisitKind::Human);
    }
    recorder.record("c", VisitKind::Bot);
    let chunk: ClickRows = recorder.take().into();
    assert_eq!(recorder.pending_human("b"), 0, "taken");
    *lock(&recorder.in_doubt) = Some((recorder.batches.next(), chunk));
    recorder.record("b", VisitKind::Human);
    // A visit limit counts the doubted visits, whether or not the store added them.
    assert_eq!(recorder.pending_human("b"), 4);
    assert_eq!(recorder.pending_human("c"), 0);
    assert_eq!(recorder.pending_human("a"), 0);
    lock(&recorder.in_doubt).take();
    assert_eq!(recorder.pending_human("b"), 1);
}

#[test]
fn a_recorder_marks_its_chunks_in_order_as_a_writer_of_its_own() {
    let (one, two) = (ClickRecorder::default(), ClickRecorder::default());
    let marks: Vec<_> = (0..3).map(|_| one.batches.next()).collect();
    assert_eq!(marks.iter().map(|m| m.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(marks.iter().all(|m| m.writer == marks[0].writer));
    assert!(marks.iter().all(|m| m.stream == FlushStream::Clicks));
    assert_ne!(two.batches.next().writer, marks[0].writer);
}

#[test]
fn shards_split_codes_in_byte_order_and_evenly() {
    for byte in 0..255 {
        assert!(
            SHARD_OF_FIRST_BYTE[byte] <= SHARD_OF_FIRST_BYTE[byte + 1],
            "shard of byte {byte} after the next byte's"
        );
    }
    let mut per_shard = [0; SHARDS];
    for &byte in codespace::ALPHABET {
        per_shard[usize::from(SHARD_OF_FIRST_BYTE[usize::from(byte)])] += 1;
    }
    assert!(
        per_shard.iter().all(|&n| n == 3 || n == 4),
        "base62 characters per shard: {per_shard:?}"
    );
    // Taken shard by shard, codes come out in byte order.
    let recorder = ClickRecorder::default();
    let codes = [
        "zz",
        "Z9",
        "0a",
        "a0",
        "",
        "-x",
        "9",
        "A",
        "~",
        "\u{e9}t\u{e9}",
    ];
    for code in codes {
        recorder.record(code, VisitKind::Human);
    }
    let mut sorted = codes;
    sorted.sort_unstable();
    let taken: Vec<String> = recorder
        .take()
        .iter()
        .map(|(code, _)| code.as_str().to_string())
        .collect();
    assert_eq!(taken, sorted);
}

#[tokio::test]
async fn a_shard_at_its_bound_asks_for_a_flush_and_the_gauge_follows() {
    let recorder = ClickRecorder::new(SHARDS * 4);
    assert_eq!(recorder.bytes(), 0);
    // Codes of one shard (the same first byte), one short of its bound: no flush asked.
    for i in 0..3 {
        recorder.record(&format!("a{i}"), VisitKind::Human);
    }
    let asked = tokio::time::timeout(std::time::Duration::from_millis(20), recorder.full());
    assert!(asked.await.is_err(), "asked too early");
    assert!(recorder.bytes() > 0, "the gauge moved");
    recorder.record("a3", VisitKind::Human);
    tokio::time::timeout(std::time::Duration::from_secs(1), recorder.full())
        .await
        .expect("a flush is asked at the bound");
    assert!(recorder.bytes() <= recorder.budget());
    assert_eq!(recorder.take().len(), 4, "no visit dropped");
}
