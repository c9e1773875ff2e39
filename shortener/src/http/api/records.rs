//! Records of a streamed import body: lines of NDJSON, or CSV records (whose quoted fields may
//! hold line breaks), each at most [`MAX_RECORD`] bytes.
//!
//! The splitter holds at most one record: a longer one is reported once as
//! [`Record::TooLong`] and its bytes are dropped as they arrive, so a 100 MB line costs no more
//! memory than a short one and the rows after it are read as usual.

/// The longest record, in bytes (a row holds a URL of at most a few KiB, and its tags).
pub const MAX_RECORD: usize = 64 * 1024;

/// What the splitter found.
#[derive(Debug, PartialEq, Eq)]
pub enum Record {
    /// A record's bytes, without its line ending.
    Bytes(Vec<u8>),
    /// A record longer than [`MAX_RECORD`] (its bytes were dropped).
    TooLong,
}

/// Splits a byte stream into records.
#[derive(Debug)]
pub struct Splitter {
    csv: bool,
    buf: Vec<u8>,
    in_quotes: bool,
    oversized: bool,
}

impl Splitter {
    /// A splitter of NDJSON lines, or (with `csv`) of CSV records.
    pub fn new(csv: bool) -> Self {
        Self {
            csv,
            buf: Vec::new(),
            in_quotes: false,
            oversized: false,
        }
    }

    /// Feeds `bytes`; every record they complete goes to `out`, in order. Blank records are
    /// skipped.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut impl FnMut(Record)) {
        while !bytes.is_empty() {
            let end = if self.csv {
                self.csv_record_end(bytes)
            } else {
                bytes.iter().position(|&b| b == b'\n')
            };
            let (part, rest, complete) = match end {
                Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                None => (bytes, &[][..], false),
            };
            if !self.oversized {
                if self.buf.len() + part.len() > MAX_RECORD {
                    self.oversized = true;
                    self.buf = Vec::new();
                } else {
                    self.buf.extend_from_slice(part);
                }
            }
            if complete {
                self.emit(out);
            }
            bytes = rest;
        }
    }

    /// Ends the stream: a last record without a line ending goes to `out`.
    pub fn finish(&mut self, out: &mut impl FnMut(Record)) {
        self.emit(out);
    }

    /// Where the record in `bytes` ends (the index of its line feed), tracking CSV quotes: a
    /// line feed inside a quoted field belongs to the field.
    fn csv_record_end(&mut self, bytes: &[u8]) -> Option<usize> {
        for (i, &b) in bytes.iter().enumerate() {
            match b {
                // An escaped quote (`""`) toggles twice, which is no change.
                b'"' => self.in_quotes = !self.in_quotes,
                b'\n' if !self.in_quotes => return Some(i),
                _ => {}
            }
        }
        None
    }

    fn emit(&mut self, out: &mut impl FnMut(Record)) {
        self.in_quotes = false;
        if std::mem::take(&mut self.oversized) {
            self.buf.clear();
            out(Record::TooLong);
            return;
        }
        let mut record = std::mem::take(&mut self.buf);
        if record.last() == Some(&b'\r') {
            record.pop();
        }
        if !record.iter().all(u8::is_ascii_whitespace) {
            out(Record::Bytes(record));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(csv: bool, chunks: &[&[u8]]) -> Vec<Record> {
        let mut splitter = Splitter::new(csv);
        let mut records = Vec::new();
        for chunk in chunks {
            splitter.push(chunk, &mut |r| records.push(r));
        }
        splitter.finish(&mut |r| records.push(r));
        records
    }

    fn bytes(text: &str) -> Record {
        Record::Bytes(text.as_bytes().to_vec())
    }

    #[test]
    fn lines_split_across_chunks_and_blank_ones_are_skipped() {
        let records = split(false, &[b"{\"a\":1}\n{\"b\"", b":2}\r\n\n  \n{\"c\":3}"]);
        assert_eq!(
            records,
            [bytes("{\"a\":1}"), bytes("{\"b\":2}"), bytes("{\"c\":3}")]
        );
    }

    #[test]
    fn csv_quotes_keep_line_breaks_inside_a_field() {
        let records = split(
            true,
            &[
                b"url,tags\n\"https://a.example/?q=\"\"x\n",
                b"y\"\"\",t\nhttps://b.example/,\n",
            ],
        );
        assert_eq!(
            records,
            [
                bytes("url,tags"),
                bytes("\"https://a.example/?q=\"\"x\ny\"\"\",t"),
                bytes("https://b.example/,"),
            ]
        );
    }

    #[test]
    fn an_oversized_record_is_reported_once_and_the_next_one_read() {
        let big = vec![b'x'; MAX_RECORD + 10];
        let records = split(
            false,
            &[b"first\n", &big[..1000], &big[1000..], b"\nnext\n"],
        );
        assert_eq!(records, [bytes("first"), Record::TooLong, bytes("next")]);
        // Exactly at the bound is still a record.
        let edge = vec![b'y'; MAX_RECORD];
        assert_eq!(split(false, &[&edge, b"\n"]), [Record::Bytes(edge.clone())]);
    }
}
