//! The routing columns of a CSV import: what a CSV export writes after a link's own columns
//! (`rules`, `ios`, `android`, `variants`, the `utm_` fields, `pass_query`, `preview_title`,
//! `preview_description`, `preview_image`), read into the fields an NDJSON row takes. Each
//! cell is only parsed here; the create's checks ([`crate::domain::RoutesInput::checked`])
//! judge the values.

use crate::domain::{Error, RoutesInput, echo};

/// A routing field a CSV column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Routing {
    /// Redirect rules, as the JSON array a create takes.
    Rules,
    /// The iOS target.
    Ios,
    /// The Android target.
    Android,
    /// A split, as the JSON array of `{url, weight}` a create takes.
    Variants,
    /// A UTM parameter, by its field name (`utm_source`, ...).
    Utm(&'static str),
    /// `true` or `false`.
    PassQuery,
    /// The preview's title.
    Title,
    /// The preview's description.
    Description,
    /// The preview's image.
    Image,
}

impl Routing {
    /// The field of a column name as [`super::rows`] compares names (lower case, without
    /// spaces, `_` and `-`), if it is one. The preview's are `preview_title`, ... and never a
    /// bare `title`: Bitly's, Shlink's and YOURLS's exports name a link so, which must not
    /// become a preview crawlers are shown.
    pub(super) fn of(key: &str) -> Option<Self> {
        Some(match key {
            "rules" => Self::Rules,
            "ios" => Self::Ios,
            "android" => Self::Android,
            "variants" => Self::Variants,
            "utmsource" => Self::Utm("utm_source"),
            "utmmedium" => Self::Utm("utm_medium"),
            "utmcampaign" => Self::Utm("utm_campaign"),
            "utmterm" => Self::Utm("utm_term"),
            "utmcontent" => Self::Utm("utm_content"),
            "passquery" => Self::PassQuery,
            "previewtitle" => Self::Title,
            "previewdescription" => Self::Description,
            "previewimage" => Self::Image,
            _ => return None,
        })
    }

    /// Sets this field of `routes` to a (non-empty) cell's `text`; a cell that is not of the
    /// field's kind is refused naming the field.
    pub(super) fn fill(self, routes: &mut RoutesInput, text: &str) -> Result<(), Error> {
        let owned = || Some(text.to_string());
        match self {
            Self::Rules => routes.rules = json_cell("rules", "invalid_rules", "rules", text)?,
            Self::Variants => {
                routes.variants = json_cell(
                    "variants",
                    "invalid_variants",
                    "variants ({url, weight})",
                    text,
                )?
            }
            Self::Ios => routes.ios = owned(),
            Self::Android => routes.android = owned(),
            Self::Utm(field) => {
                let utm = &mut routes.utm;
                *match field {
                    "utm_source" => &mut utm.source,
                    "utm_medium" => &mut utm.medium,
                    "utm_campaign" => &mut utm.campaign,
                    "utm_term" => &mut utm.term,
                    _ => &mut utm.content,
                } = owned()
            }
            Self::PassQuery => routes.pass_query = pass_query(text)?,
            Self::Title => routes.preview.title = owned(),
            Self::Description => routes.preview.description = owned(),
            Self::Image => routes.preview.image = owned(),
        }
        Ok(())
    }
}

/// A `pass_query` cell: `true` or `false` in any case (spreadsheets write `TRUE`).
fn pass_query(text: &str) -> Result<bool, Error> {
    if text.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if text.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(Error::invalid(
            "invalid_pass_query",
            format!("pass_query must be true or false, not {}", echo(text)),
        ))
    }
}

/// A cell holding a JSON array (`field` names it, `what` its items): refused with `code`
/// when it is not one.
fn json_cell<T: serde::de::DeserializeOwned>(
    field: &str,
    code: &'static str,
    what: &str,
    text: &str,
) -> Result<Vec<T>, Error> {
    serde_json::from_str(text)
        .map_err(|e| Error::invalid(code, format!("{field}: not a JSON array of {what}: {e}")))
}
