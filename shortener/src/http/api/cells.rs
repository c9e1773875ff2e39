//! CSV cells that a spreadsheet shows as text. A cell that begins with `=`, `+`, `-`, `@`, a
//! tab or a carriage return is a formula to Excel, LibreOffice and Google Sheets, and the
//! exports carry text that callers and visitors chose (a link's preview title, a UTM value, a
//! person's name from a sign-in): such a cell leaves with a `'` in front, which those programs
//! read as "this is text" and do not show. An import takes the `'` off again, so a links export
//! imports back to the same values.
//!
//! The mapping is one-to-one: a cell is prefixed when it starts with a formula character after
//! any number of `'`, so a value that really begins with `'=` leaves as `''=` and comes back
//! as `'=`, and a cell no export would have written keeps its `'` on import.

use std::borrow::Cow;

/// Whether a spreadsheet would read `cell` as a formula once its leading `'`s are taken off.
fn formula_after_quotes(cell: &str) -> bool {
    matches!(
        cell.trim_start_matches('\'').chars().next(),
        Some('=' | '+' | '-' | '@' | '\t' | '\r')
    )
}

/// `cell` as an export writes it: with a `'` in front when a spreadsheet would otherwise
/// compute it.
pub(crate) fn exported(cell: &str) -> Cow<'_, str> {
    if formula_after_quotes(cell) {
        Cow::Owned(format!("'{cell}"))
    } else {
        Cow::Borrowed(cell)
    }
}

/// `cell` as an import reads it: the `'` [`exported`] put in front taken off.
pub(crate) fn imported(cell: &str) -> &str {
    match cell.strip_prefix('\'') {
        Some(rest) if formula_after_quotes(rest) => rest,
        _ => cell,
    }
}

#[cfg(test)]
mod tests {
    use super::{exported, imported};

    #[test]
    fn formula_cells_leave_as_text_and_come_back_as_they_were() {
        let table = [
            (
                "=HYPERLINK(\"https://evil.example\",\"x\")",
                "'=HYPERLINK(\"https://evil.example\",\"x\")",
            ),
            ("+1", "'+1"),
            ("-2+3", "'-2+3"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\t=1", "'\t=1"),
            ("\r=1", "'\r=1"),
            ("'=1", "''=1"),
            ("''-x", "'''-x"),
            ("'quoted", "'quoted"),
            ("'", "'"),
            ("https://example.com/a=b", "https://example.com/a=b"),
            ("launch-2026", "launch-2026"),
            ("", ""),
        ];
        for (value, cell) in table {
            assert_eq!(exported(value), cell, "export of {value:?}");
            assert_eq!(imported(cell), value, "import of {cell:?}");
        }
    }

    #[test]
    fn an_import_keeps_a_quote_no_export_wrote() {
        for cell in ["'quoted", "'", "'1", "it's"] {
            assert_eq!(imported(cell), cell);
        }
    }
}
