//! Client-supplied text, made safe to repeat: in a log line or an error message it can neither
//! forge a line (control characters), reorder what a reader sees (bidirectional overrides),
//! nor grow without bound.

use std::borrow::Cow;
use std::fmt;

/// Whether `c` would break a log line or mislead a reader: control characters, and the
/// bidirectional formatting characters (embeddings, overrides, isolates, marks) and line and
/// paragraph separators.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{2028}' | '\u{2029}'
        )
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// Whether `c` may stand in text a link shows to people (a preview's title or description):
/// not a control character, not a bidirectional embedding, override or isolate (which can
/// make a title read as something else), not a line or paragraph separator, and not a
/// noncharacter (U+FDD0-U+FDEF, U+xxFFFE, U+xxFFFF), which XML cannot hold and no text needs.
/// The directional marks (U+200E, U+200F, U+061C) stay allowed: right-to-left text uses them.
pub fn displayable(c: char) -> bool {
    let code = c as u32;
    !(c.is_control()
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
        || matches!(c, '\u{2028}' | '\u{2029}')
        || (0xfdd0..=0xfdef).contains(&code)
        || code & 0xfffe == 0xfffe)
}

/// `text` with every unsafe character written as `\u{...}`.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// At most `max` characters of `text`, escaped, with `…` where it was cut.
pub fn bounded(text: &str, max: usize) -> String {
    let mut shown: String = text.chars().take(max).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    escape(&shown).into_owned()
}

/// A client-supplied string as a log field: escaped, and cut at 200 characters.
pub struct Untrusted<'a>(pub &'a str);

impl fmt::Display for Untrusted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&bounded(self.0, 200))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displayable_text_keeps_marks_and_refuses_overrides_and_noncharacters() {
        for c in [
            'a',
            'é',
            '\u{5d0}',
            '\u{200f}',
            '\u{200e}',
            '\u{fffd}',
            '\u{1f600}',
        ] {
            assert!(super::displayable(c), "{c:?}");
        }
        for c in [
            '\n',
            '\u{7f}',
            '\u{202e}',
            '\u{2067}',
            '\u{2028}',
            '\u{fdd0}',
            '\u{fffe}',
            '\u{ffff}',
            '\u{1fffe}',
            '\u{10ffff}',
        ] {
            assert!(!super::displayable(c), "{c:?}");
        }
    }

    #[test]
    fn control_and_bidi_characters_are_escaped_and_long_text_is_cut() {
        assert_eq!(escape("plain text"), Cow::Borrowed("plain text"));
        assert_eq!(escape("a\nb\r\u{1b}[31m"), "a\\u{a}b\\u{d}\\u{1b}[31m");
        assert_eq!(escape("evil\u{202e}gpj.exe"), "evil\\u{202e}gpj.exe");
        assert_eq!(escape("x\u{2066}y\u{2028}z"), "x\\u{2066}y\\u{2028}z");
        assert_eq!(bounded(&"é".repeat(10), 3), "ééé…");
        assert_eq!(
            Untrusted(&"z".repeat(1000)).to_string().chars().count(),
            201
        );
    }
}
