//! `shortener codes encode|decode`: the operator's view of the code space.

use anyhow::{Context, bail};
use codespace::CodeSpace;
use std::io::{BufRead, Write};

/// Which way to map items.
#[derive(Debug, Clone, Copy)]
pub enum Direction {
    /// IDs to codes.
    Encode,
    /// Codes to IDs.
    Decode,
}

/// Maps each item (from `args`, or one per line of `input` when `args` is empty) and writes one
/// result per line to `output`. Stops at the first bad item with an error naming it.
pub fn run(
    space: &CodeSpace,
    direction: Direction,
    args: &[String],
    input: impl BufRead,
    output: impl Write,
) -> anyhow::Result<()> {
    let mut output = std::io::BufWriter::new(output);
    let mut map = |item: &str, place: &str| -> anyhow::Result<()> {
        let item = item.trim();
        match direction {
            Direction::Encode => {
                let id: u64 = match item.parse() {
                    Ok(id) => id,
                    Err(e) => bail!(
                        "invalid ID {item:?} ({place}): {e}; expected an integer from 0 to {}",
                        u64::MAX
                    ),
                };
                writeln!(output, "{}", space.encode(id))?;
            }
            Direction::Decode => {
                let id = space
                    .decode(item)
                    .map_err(|e| anyhow::anyhow!("invalid code {item:?} ({place}): {e}"))?;
                writeln!(output, "{id}")?;
            }
        }
        Ok(())
    };
    if args.is_empty() {
        for (n, line) in input.lines().enumerate() {
            let line = line.context("read standard input")?;
            if line.trim().is_empty() {
                continue;
            }
            map(&line, &format!("line {}", n + 1))?;
        }
    } else {
        for (n, arg) in args.iter().enumerate() {
            map(arg, &format!("argument {}", n + 1))?;
        }
    }
    output.flush().context("write standard output")?;
    Ok(())
}
