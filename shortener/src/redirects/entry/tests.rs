//! Tests of the cached entry's layout and fields.

use super::*;
use crate::redirects::places::Places;

fn fields(places: &Places, kind: Kind, rare: Rare) -> Fields {
    Fields::new(
        kind,
        false,
        None,
        places.place("acme", Some("go.acme.example")),
        rare.boxed(),
    )
}

#[test]
fn an_entry_reads_back_what_it_was_made_of() {
    let places = Places::default();
    let expires = DateTime::from_timestamp_micros(1_900_000_000_123_456).expect("a time");
    let mut made = Fields::new(
        Kind::Link,
        true,
        Some(expires),
        places.place("t", None),
        None,
    );
    made.generation = 7;
    let entry = Entry::new(made, "https://example.com/é?q=1").expect("an entry");
    assert_eq!(entry.url(), "https://example.com/é?q=1");
    assert_eq!((entry.kind(), entry.gone()), (Kind::Link, true));
    assert_eq!(entry.expires_at(), Some(expires));
    assert!(!entry.expired(expires - chrono::Duration::microseconds(1)));
    assert!(entry.expired(expires));
    assert_eq!((&**entry.tenant(), entry.domain()), ("t", None));
    assert_eq!(entry.fields().generation, 7);
    assert_eq!(entry.rare(), &Rare::default());
    // 26 bytes of URL: the 32-byte array, so the allocator's 96-byte class.
    assert_eq!(entry.heap_bytes(), 96);
    let blocked = Entry::new(fields(&places, Kind::Blocked, Rare::default()), "").expect("e");
    assert_eq!((blocked.kind(), blocked.url()), (Kind::Blocked, ""));
    assert_eq!(blocked.domain(), Some("go.acme.example"));
    assert_ne!(blocked, entry);
}

#[test]
fn every_length_is_held_and_sized_to_an_allocator_class() {
    let places = Places::default();
    let classes = [
        64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768,
    ];
    for len in [0, 1, 8, 9, 60, 64, 65, 500, 4031, 4032, 4033, 70_000] {
        let url = "u".repeat(len);
        let made = Fields::new(Kind::Link, false, None, places.place("t", None), None);
        let entry = Entry::new(made, &url).expect("an entry");
        assert_eq!(entry.url(), url, "{len}");
        let block = ARC_COUNTS + size_of_val::<Block<[u8]>>(&entry.0);
        let inline = if len > LONGEST_INLINE { 0 } else { len };
        assert!(block >= 64 + inline && block <= 4096, "{len}: {block}");
        if len <= 600 {
            assert!(classes.contains(&block), "{len}: a block of {block} bytes");
        }
        if len > LONGEST_INLINE {
            assert_eq!(block, 64, "a long URL is kept in the box");
            assert!(entry.heap_bytes() > len);
        }
    }
}

#[test]
fn the_block_lives_while_any_handle_does_and_drops_its_parts_once() {
    let places = Places::default();
    let limit = Arc::new(VisitLimit::new(3, 1));
    let rare = Rare {
        limit: Some(Arc::clone(&limit)),
        ..Rare::default()
    };
    let entry = Entry::new(fields(&places, Kind::Link, rare), "https://e.example/").expect("e");
    let copies: Vec<Entry> = (0..4).map(|_| entry.clone()).collect();
    drop(entry);
    let threads: Vec<_> = copies
        .into_iter()
        .map(|copy| std::thread::spawn(move || copy.url().len()))
        .collect();
    for thread in threads {
        assert_eq!(thread.join().expect("a reader"), 18);
    }
    // Every handle is gone: the block dropped its box, and with it its count of the limit.
    assert_eq!(Arc::strong_count(&limit), 1);
}
