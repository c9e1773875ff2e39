//! What an entry says changed: secret fields masked, and bounded in size.

/// The most bytes a change summary keeps as compact JSON; a larger one is replaced by the
/// names of the fields it changed.
pub const MAX_CHANGE_BYTES: usize = 4096;

/// Fields whose values are never recorded, whatever object they belong to: a present one is
/// recorded as `"(set)"` or `null`.
const SECRET_FIELDS: &[&str] = &["password", "secret", "token", "digest", "client_secret"];

/// `change` made safe and bounded for the log: secret fields masked at any depth, and a
/// summary over [`MAX_CHANGE_BYTES`] replaced by `{"truncated": true, "fields": [...]}`.
pub fn summary(change: serde_json::Value) -> serde_json::Value {
    let masked = mask(change);
    if compact_len_at_most(&masked, MAX_CHANGE_BYTES) {
        return masked;
    }
    let fields: Vec<String> = match &masked {
        serde_json::Value::Object(map) => map.keys().take(64).cloned().collect(),
        _ => Vec::new(),
    };
    serde_json::json!({ "truncated": true, "fields": fields })
}

/// Whether `value` as compact JSON takes at most `limit` bytes. Most changes are far smaller:
/// a bound from the value's parts (every byte of a string escaped at the most, six bytes)
/// answers them without writing the JSON; the rest are written to a counter that stops at
/// the limit, so no change is ever written out whole to be measured.
pub(super) fn compact_len_at_most(value: &serde_json::Value, limit: usize) -> bool {
    if json_len_bound(value) <= limit {
        return true;
    }
    struct Counter {
        left: usize,
    }
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.left = self
                .left
                .checked_sub(bytes.len())
                .ok_or_else(|| std::io::Error::other("over the limit"))?;
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(Counter { left: limit }, value).is_ok()
}

/// At least as many bytes as `value` takes as compact JSON.
pub(super) fn json_len_bound(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    let string = |s: &str| s.len() * 6 + 2;
    match value {
        Value::Null | Value::Bool(_) => 5,
        // An f64 or a 64-bit integer is at most 24 characters.
        Value::Number(_) => 24,
        Value::String(s) => string(s),
        Value::Array(items) => 2 + items.iter().map(|v| json_len_bound(v) + 1).sum::<usize>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| string(k) + 2 + json_len_bound(v))
                .sum::<usize>()
        }
    }
}

fn mask(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(name, value)| {
                    if SECRET_FIELDS.contains(&name.as_str()) {
                        let shown = if value.is_null() {
                            Value::Null
                        } else {
                            Value::from("(set)")
                        };
                        (name, shown)
                    } else {
                        (name, mask(value))
                    }
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(mask).collect()),
        other => other,
    }
}
