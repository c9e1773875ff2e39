//! Client-supplied text, made safe for log lines.
//!
//! A holder name, a token file's error or anything else a caller or operator typed can hold
//! characters that forge or disguise log lines in a text log: line breaks (also Unicode's
//! U+0085, U+2028 and U+2029), other control characters, and bidirectional controls that make a
//! terminal show the line in another order. [`Escaped`] writes each of them as `\u{XXXX}` (and
//! a backslash as `\\`, so an escape can never be faked); everything else passes unchanged.

use std::fmt;

/// Displays a string with control, line-separator and bidirectional-control characters escaped.
#[derive(Debug, Clone, Copy)]
pub struct Escaped<'a>(pub &'a str);

/// Whether `c` must not reach a log line (or a stored identity) raw.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' // line and paragraph separators
                | '\u{061C}' // Arabic letter mark
                | '\u{200E}' | '\u{200F}' // left-to-right and right-to-left marks
                | '\u{202A}'..='\u{202E}' // embeddings, overrides, pop
                | '\u{2066}'..='\u{2069}' // isolates
        )
}

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write;
        for c in self.0.chars() {
            if c == '\\' {
                f.write_str("\\\\")?;
            } else if is_unsafe(c) {
                write!(f, "\\u{{{:04X}}}", u32::from(c))?;
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_breaks_controls_and_bidi_marks_are_escaped_and_the_rest_is_kept() {
        let cases = [
            ("pod-1", "pod-1"),
            ("é ü 名前", "é ü 名前"),
            ("a\nb", "a\\u{000A}b"),
            ("a\r\n", "a\\u{000D}\\u{000A}"),
            ("x\u{0085}y", "x\\u{0085}y"),
            ("x\u{2028}y\u{2029}", "x\\u{2028}y\\u{2029}"),
            ("evil\u{202E}gnp.exe", "evil\\u{202E}gnp.exe"),
            ("\u{2066}iso\u{2069}", "\\u{2066}iso\\u{2069}"),
            ("\u{200F}\u{061C}", "\\u{200F}\\u{061C}"),
            ("back\\slash", "back\\\\slash"),
            ("\\u{000A}", "\\\\u{000A}"),
            ("\u{1b}[31mred", "\\u{001B}[31mred"),
        ];
        for (raw, shown) in cases {
            assert_eq!(Escaped(raw).to_string(), shown, "{raw:?}");
        }
    }
}
