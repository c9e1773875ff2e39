//! A tiny MaxMind DB (format 2.0) writer for tests: an IPv4 search tree with 24-bit records
//! mapping whole networks to `{"country": {"iso_code": CODE}}`, a data section, and the
//! metadata a reader checks. Enough for a country lookup; nothing like a real database.

/// One value of the MaxMind DB data format.
enum Data<'a> {
    Text(&'a str),
    U16(u16),
    U32(u32),
    U64(u64),
    Map(Vec<(&'a str, Data<'a>)>),
    Array(Vec<Data<'a>>),
}

/// Control bytes for a value of `kind` (1-15) and `size` (< 29).
fn control(out: &mut Vec<u8>, kind: u8, size: usize) {
    assert!(size < 29, "only small values are written");
    if kind <= 7 {
        out.push((kind << 5) | size as u8);
    } else {
        out.push(size as u8);
        out.push(kind - 7);
    }
}

fn unsigned(out: &mut Vec<u8>, kind: u8, value: u64, width: usize) {
    let bytes = value.to_be_bytes();
    let significant: Vec<u8> = bytes[8 - width..]
        .iter()
        .copied()
        .skip_while(|b| *b == 0)
        .collect();
    control(out, kind, significant.len());
    out.extend(significant);
}

fn encode(out: &mut Vec<u8>, value: &Data<'_>) {
    match value {
        Data::Text(text) => {
            control(out, 2, text.len());
            out.extend(text.as_bytes());
        }
        Data::U16(n) => unsigned(out, 5, u64::from(*n), 2),
        Data::U32(n) => unsigned(out, 6, u64::from(*n), 4),
        Data::U64(n) => unsigned(out, 9, *n, 8),
        Data::Map(pairs) => {
            control(out, 7, pairs.len());
            for (key, value) in pairs {
                encode(out, &Data::Text(key));
                encode(out, value);
            }
        }
        Data::Array(items) => {
            control(out, 11, items.len());
            for item in items {
                encode(out, item);
            }
        }
    }
}

/// A record of the search tree.
#[derive(Clone, Copy)]
enum Record {
    Empty,
    Node(usize),
    Data(usize),
}

/// A database that places each `(network, prefix length, ISO code)` in that country.
pub fn country_db(networks: &[([u8; 4], u8, &str)]) -> Vec<u8> {
    let mut data = Vec::new();
    let mut nodes: Vec<[Record; 2]> = vec![[Record::Empty; 2]];
    for (address, prefix, iso) in networks {
        let offset = data.len();
        encode(
            &mut data,
            &Data::Map(vec![(
                "country",
                Data::Map(vec![("iso_code", Data::Text(iso))]),
            )]),
        );
        let bits = u32::from_be_bytes(*address);
        let mut node = 0;
        for depth in 0..*prefix {
            let bit = ((bits >> (31 - depth)) & 1) as usize;
            if depth + 1 == *prefix {
                nodes[node][bit] = Record::Data(offset);
            } else {
                node = match nodes[node][bit] {
                    Record::Node(next) => next,
                    _ => {
                        nodes.push([Record::Empty; 2]);
                        nodes[node][bit] = Record::Node(nodes.len() - 1);
                        nodes.len() - 1
                    }
                };
            }
        }
    }
    let count = nodes.len();
    let mut out = Vec::new();
    for node in &nodes {
        for record in node {
            let value = match *record {
                Record::Empty => count,
                Record::Node(next) => next,
                Record::Data(offset) => count + 16 + offset,
            };
            out.extend(&(value as u32).to_be_bytes()[1..]);
        }
    }
    out.extend([0u8; 16]);
    out.extend(data);
    out.extend(b"\xAB\xCD\xEFMaxMind.com");
    encode(
        &mut out,
        &Data::Map(vec![
            ("binary_format_major_version", Data::U16(2)),
            ("binary_format_minor_version", Data::U16(0)),
            ("build_epoch", Data::U64(1_700_000_000)),
            ("database_type", Data::Text("Test-Country")),
            ("description", Data::Map(vec![("en", Data::Text("test"))])),
            ("ip_version", Data::U16(4)),
            ("languages", Data::Array(vec![Data::Text("en")])),
            ("node_count", Data::U32(count as u32)),
            ("record_size", Data::U16(24)),
        ]),
    );
    out
}
