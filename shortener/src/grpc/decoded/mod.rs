//! What a request message will take in memory once decoded, reckoned from its bytes as they
//! arrive, before tonic decodes it. A message is decoded whole, and an element of a repeated
//! field costs far more decoded than on the wire: an empty `CreateLinkRequest` is two bytes sent
//! and several hundred held, so a batch's 3 MiB could become hundreds of megabytes before the
//! handler sees that it holds more items than it may. The scan follows the gRPC framing and the
//! protobuf wire format of the methods whose messages are large (a batch create, an import's
//! messages), charges each element what its decoded form holds, and refuses a message whose
//! charge passes its bound before its last byte reaches the decoder.

use proto::shortener::v1 as pb;
use std::mem::size_of;

/// What one field of a message decodes into.
#[derive(Clone, Copy)]
enum Field {
    /// A string or bytes: its length.
    Text,
    /// Repeated strings: a `String` and its length each.
    Texts,
    /// A message held inline (an `Option` of it): what its own fields hold.
    Message(&'static Shape),
    /// Repeated messages: the message and what its fields hold, each.
    Messages(&'static Shape),
}

/// The fields of a message type that hold memory of their own when decoded. Numbers, booleans
/// and fields it does not know cost nothing beyond the struct they are decoded into.
pub struct Shape {
    /// The bytes of the decoded struct itself.
    size: usize,
    fields: &'static [(u32, Field)],
}

impl Shape {
    fn field(&self, number: u32) -> Option<Field> {
        self.fields
            .iter()
            .find(|(n, _)| *n == number)
            .map(|(_, field)| *field)
    }
}

const VARIANT: Shape = Shape {
    size: size_of::<pb::Variant>(),
    fields: &[(1, Field::Text)],
};

const CONDITION: Shape = Shape {
    size: size_of::<pb::Condition>(),
    fields: &[(1, Field::Text), (2, Field::Text), (3, Field::Texts)],
};

const RULE: Shape = Shape {
    size: size_of::<pb::Rule>(),
    fields: &[
        (1, Field::Text),
        (2, Field::Messages(&CONDITION)),
        (3, Field::Messages(&VARIANT)),
    ],
};

/// `google.protobuf.Timestamp`: two numbers, held inline.
const TIMESTAMP: Shape = Shape {
    size: size_of::<prost_types::Timestamp>(),
    fields: &[],
};

const CREATE: Shape = Shape {
    size: size_of::<pb::CreateLinkRequest>(),
    fields: &[
        (1, Field::Text),
        (2, Field::Text),
        (3, Field::Message(&TIMESTAMP)),
        (6, Field::Text),
        (7, Field::Texts),
        (9, Field::Text),
        (10, Field::Text),
        (11, Field::Messages(&RULE)),
        (12, Field::Text),
        (13, Field::Text),
        (14, Field::Messages(&VARIANT)),
        (15, Field::Text),
        (16, Field::Text),
        (17, Field::Text),
        (18, Field::Text),
        (19, Field::Text),
        (21, Field::Text),
        (22, Field::Text),
        (23, Field::Text),
    ],
};

/// `BatchCreateLinksRequest`.
pub const BATCH: Shape = Shape {
    size: size_of::<pb::BatchCreateLinksRequest>(),
    fields: &[(1, Field::Messages(&CREATE))],
};

const IMPORT_ROW: Shape = Shape {
    size: size_of::<pb::ImportRow>(),
    fields: &[
        (1, Field::Text),
        (2, Field::Text),
        (3, Field::Texts),
        (4, Field::Message(&TIMESTAMP)),
        (5, Field::Message(&TIMESTAMP)),
        (7, Field::Text),
        (8, Field::Messages(&RULE)),
        (9, Field::Text),
        (10, Field::Text),
        (11, Field::Messages(&VARIANT)),
        (12, Field::Text),
        (13, Field::Text),
        (14, Field::Text),
        (15, Field::Text),
        (16, Field::Text),
        (18, Field::Text),
        (19, Field::Text),
        (20, Field::Text),
        (22, Field::Text),
    ],
};

/// `ImportLinksRequest`, each message of the stream.
pub const IMPORT: Shape = Shape {
    size: size_of::<pb::ImportLinksRequest>(),
    fields: &[
        (1, Field::Messages(&IMPORT_ROW)),
        (3, Field::Text),
        (4, Field::Texts),
    ],
};

/// Why a message is refused before it is decoded.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Decoded, it would hold more than the bound, in bytes.
    TooLarge { bound: usize },
    /// It is not protobuf a decoder would take (a length past its message's end, a varint of
    /// more than ten bytes, field number zero, a group).
    Malformed,
}

/// A message (or a message inside it) being read, and the bytes of it still to come.
struct Level {
    /// `None` while the bytes are passed over unread (a compressed message).
    shape: Option<&'static Shape>,
    left: usize,
}

/// Where the reader is within the current field.
#[derive(Clone, Copy)]
enum Step {
    /// Reading a field's key (a varint).
    Key { value: u64, shift: u32 },
    /// Reading a length's varint; then `field` is charged for that many bytes.
    Length {
        field: Option<Field>,
        value: u64,
        shift: u32,
    },
    /// Passing over a varint number.
    Varint { read: u32 },
    /// Passing over this many bytes.
    Skip(usize),
}

const BOUNDARY: Step = Step::Key { value: 0, shift: 0 };

/// Reckons the decoded size of each message of one call's request stream.
pub struct Reckoner {
    root: &'static Shape,
    bound: usize,
    prefix: [u8; 5],
    have: usize,
    levels: Vec<Level>,
    step: Step,
    charged: usize,
}

impl Reckoner {
    /// A reckoner for a stream of `root` messages, each refused once it would hold more than
    /// `bound` bytes decoded.
    pub fn new(root: &'static Shape, bound: usize) -> Self {
        Self {
            root,
            bound,
            prefix: [0; 5],
            have: 0,
            levels: Vec::with_capacity(4),
            step: BOUNDARY,
            charged: 0,
        }
    }

    /// Reads the next bytes of the stream. Once this has refused, the stream must not go on.
    pub fn feed(&mut self, mut data: &[u8]) -> Result<(), Refusal> {
        loop {
            if self.levels.is_empty() {
                if data.is_empty() {
                    return Ok(());
                }
                data = self.read_prefix(data);
                continue;
            }
            let last = self.levels.len() - 1;
            if self.levels[last].left == 0 {
                if !matches!(self.step, Step::Key { shift: 0, .. }) {
                    return Err(Refusal::Malformed);
                }
                self.levels.pop();
                continue;
            }
            let Some((&byte, rest)) = data.split_first() else {
                return Ok(());
            };
            if let Step::Skip(n) = self.step {
                if n > self.levels[last].left {
                    return Err(Refusal::Malformed);
                }
                let take = n.min(data.len());
                self.levels[last].left -= take;
                self.step = if take == n {
                    BOUNDARY
                } else {
                    Step::Skip(n - take)
                };
                data = &data[take..];
                continue;
            }
            self.levels[last].left -= 1;
            data = rest;
            self.step_byte(byte)?;
        }
    }

    /// Takes the bytes of a message's 5-byte prefix (a compression flag and the length);
    /// returns the rest.
    fn read_prefix<'a>(&mut self, data: &'a [u8]) -> &'a [u8] {
        let take = (5 - self.have).min(data.len());
        self.prefix[self.have..self.have + take].copy_from_slice(&data[..take]);
        self.have += take;
        if self.have == 5 {
            self.have = 0;
            let length = u32::from_be_bytes([
                self.prefix[1],
                self.prefix[2],
                self.prefix[3],
                self.prefix[4],
            ]) as usize;
            let compressed = self.prefix[0] != 0;
            self.charged = self.root.size;
            self.levels.push(Level {
                shape: (!compressed).then_some(self.root),
                left: length,
            });
            // A compressed message is not read: the server accepts none, and refuses it.
            self.step = if compressed && length > 0 {
                Step::Skip(length)
            } else {
                BOUNDARY
            };
        }
        &data[take..]
    }

    /// Reads one byte of a key, a length or a number.
    fn step_byte(&mut self, byte: u8) -> Result<(), Refusal> {
        let more = byte & 0x80 != 0;
        let bits = u64::from(byte & 0x7f);
        self.step = match self.step {
            Step::Varint { read } if more && read >= 9 => return Err(Refusal::Malformed),
            Step::Varint { read } if more => Step::Varint { read: read + 1 },
            Step::Varint { .. } => BOUNDARY,
            Step::Key { shift, .. } | Step::Length { shift, .. } if shift > 63 => {
                return Err(Refusal::Malformed);
            }
            Step::Key { value, shift } => {
                let value = value | bits << shift;
                if more {
                    Step::Key {
                        value,
                        shift: shift + 7,
                    }
                } else {
                    self.after_key(value)?
                }
            }
            Step::Length {
                field,
                value,
                shift,
            } => {
                let value = value | bits << shift;
                if more {
                    Step::Length {
                        field,
                        value,
                        shift: shift + 7,
                    }
                } else {
                    self.after_length(field, value)?
                }
            }
            Step::Skip(_) => unreachable!("skips are taken whole in feed"),
        };
        Ok(())
    }

    /// What follows a field's key, by its wire type.
    fn after_key(&self, key: u64) -> Result<Step, Refusal> {
        let number = u32::try_from(key >> 3).map_err(|_| Refusal::Malformed)?;
        if number == 0 {
            return Err(Refusal::Malformed);
        }
        match key & 7 {
            0 => Ok(Step::Varint { read: 0 }),
            1 => Ok(Step::Skip(8)),
            5 => Ok(Step::Skip(4)),
            2 => Ok(Step::Length {
                field: self.levels.last().and_then(|l| l.shape?.field(number)),
                value: 0,
                shift: 0,
            }),
            _ => Err(Refusal::Malformed),
        }
    }

    /// Charges a length-delimited field of `length` bytes and steps over or into it.
    fn after_length(&mut self, field: Option<Field>, length: u64) -> Result<Step, Refusal> {
        let last = self.levels.len() - 1;
        let length = usize::try_from(length).map_err(|_| Refusal::Malformed)?;
        if length > self.levels[last].left {
            return Err(Refusal::Malformed);
        }
        let (cost, inner) = match field {
            None => (0, None),
            Some(Field::Text) => (length, None),
            Some(Field::Texts) => (size_of::<String>() + length, None),
            Some(Field::Message(shape)) => (0, Some(shape)),
            Some(Field::Messages(shape)) => (shape.size, Some(shape)),
        };
        self.charged = self.charged.saturating_add(cost);
        if self.charged > self.bound {
            return Err(Refusal::TooLarge { bound: self.bound });
        }
        let Some(shape) = inner else {
            return Ok(if length == 0 {
                BOUNDARY
            } else {
                Step::Skip(length)
            });
        };
        self.levels[last].left -= length;
        self.levels.push(Level {
            shape: Some(shape),
            left: length,
        });
        Ok(BOUNDARY)
    }

    /// What the message being read has been charged so far (the last one, between messages).
    #[cfg(test)]
    fn charged(&self) -> usize {
        self.charged
    }
}

/// A message as gRPC frames it (uncompressed), for tests.
#[cfg(test)]
pub(super) fn framed(message: &impl prost::Message) -> Vec<u8> {
    let body = message.encode_to_vec();
    let mut out = vec![0];
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

#[cfg(test)]
mod tests;
