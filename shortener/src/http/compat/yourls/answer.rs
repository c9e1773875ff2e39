//! YOURLS's answers: one tree of fields, written as JSON, XML or the `simple` text, with the
//! HTTP status YOURLS derives from it (`statusCode`, else `errorCode`, else 200).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::fmt::Write;

/// A value of an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string (YOURLS sends stored numbers such as `clicks` as strings too).
    Str(String),
    /// A number.
    Int(u64),
    /// Named fields, in order.
    Map(Vec<(String, Value)>),
}

impl From<&str> for Value {
    fn from(text: &str) -> Self {
        Value::Str(text.to_string())
    }
}

impl From<String> for Value {
    fn from(text: String) -> Self {
        Value::Str(text)
    }
}

impl From<u64> for Value {
    fn from(number: u64) -> Self {
        Value::Int(number)
    }
}

/// How an answer is written (`format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `application/json`.
    Json,
    /// `application/xml`, YOURLS's default.
    Xml,
    /// The one value that matters (a short URL, a long URL), as plain text.
    Simple,
}

impl Format {
    /// The format `text` names (none: XML, as YOURLS); `jsonp` and anything else are refused
    /// with the message to send.
    pub fn parse(text: Option<&str>) -> Result<Self, String> {
        match text.map(str::to_ascii_lowercase).as_deref() {
            None | Some("") | Some("xml") => Ok(Format::Xml),
            Some("json") => Ok(Format::Json),
            Some("simple") => Ok(Format::Simple),
            Some("jsonp") => Err("format jsonp is not served (a script answer would let any \
                 page read this API with a visitor's key); use json, xml or simple"
                .to_string()),
            Some(_) => Err(format!(
                "format must be json, xml or simple, not {}",
                crate::domain::echo(text.unwrap_or_default())
            )),
        }
    }
}

/// One answer: its fields and the text of its `simple` format.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The fields, in YOURLS's order.
    pub fields: Vec<(String, Value)>,
    /// What `format=simple` writes.
    pub simple: String,
    /// Seconds a client should wait before it retries (sent as `Retry-After`).
    pub retry_after: Option<u64>,
}

impl Answer {
    /// An answer of `fields` whose `simple` text is `simple`.
    pub fn new(fields: Vec<(&str, Value)>, simple: impl Into<String>) -> Self {
        Self {
            fields: fields
                .into_iter()
                .map(|(name, value)| (name.to_string(), value))
                .collect(),
            simple: simple.into(),
            retry_after: None,
        }
    }

    /// An error the way YOURLS answers one outside a create (a refused key, an unknown
    /// action): `message` and `errorCode`, the HTTP status.
    pub fn error(status: StatusCode, message: impl Into<String>) -> Self {
        let message = message.into();
        Self::new(
            vec![
                ("message", message.clone().into()),
                ("errorCode", status.as_u16().to_string().into()),
            ],
            message,
        )
    }

    /// The HTTP status: `statusCode`, else `errorCode`, else 200.
    pub fn status(&self) -> StatusCode {
        let code = |name: &str| {
            self.fields
                .iter()
                .find(|(field, _)| field == name)
                .and_then(|(_, value)| match value {
                    Value::Str(text) => text.parse::<u16>().ok(),
                    Value::Int(number) => u16::try_from(*number).ok(),
                    Value::Map(_) => None,
                })
                .and_then(|code| StatusCode::from_u16(code).ok())
        };
        code("statusCode")
            .or_else(|| code("errorCode"))
            .unwrap_or(StatusCode::OK)
    }

    /// The response in `format`.
    pub fn render(&self, format: Format) -> Response {
        let (media, body) = match format {
            Format::Json => ("application/json", json(&self.fields)),
            Format::Xml => ("application/xml", xml(&self.fields)),
            Format::Simple => ("text/plain; charset=utf-8", self.simple.clone()),
        };
        let mut response = (
            self.status(),
            [
                (header::CONTENT_TYPE, HeaderValue::from_static(media)),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
            body,
        )
            .into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

fn json(fields: &[(String, Value)]) -> String {
    let mut out = String::new();
    write_json_map(&mut out, fields);
    out
}

fn write_json_map(out: &mut String, fields: &[(String, Value)]) {
    out.push('{');
    for (i, (name, value)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::Value::from(name.as_str()).to_string());
        out.push(':');
        match value {
            Value::Str(text) => out.push_str(&serde_json::Value::from(text.as_str()).to_string()),
            Value::Int(number) => {
                let _ = write!(out, "{number}");
            }
            Value::Map(inner) => write_json_map(out, inner),
        }
    }
    out.push('}');
}

/// XML as YOURLS writes it: a declaration and a `<root>` element of one element per field
/// (nested for maps), text escaped.
fn xml(fields: &[(String, Value)]) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<root>");
    write_xml(&mut out, fields);
    out.push_str("</root>\n");
    out
}

fn write_xml(out: &mut String, fields: &[(String, Value)]) {
    for (name, value) in fields {
        let _ = write!(out, "<{name}>");
        match value {
            Value::Str(text) => escape_into(out, text),
            Value::Int(number) => {
                let _ = write!(out, "{number}");
            }
            Value::Map(inner) => write_xml(out, inner),
        }
        let _ = write!(out, "</{name}>");
    }
}

fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Characters XML 1.0 cannot hold at all are left out (its `Char` production:
            // no C0 control but tab and line ends, no U+FFFE or U+FFFF).
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            '\u{fffe}' | '\u{ffff}' => {}
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Answer {
        Answer::new(
            vec![
                ("status", "success".into()),
                (
                    "url",
                    Value::Map(vec![(
                        "keyword".into(),
                        "a<b&\"c\u{1}\u{fffe}\u{ffff}".into(),
                    )]),
                ),
                ("statusCode", 200u64.into()),
            ],
            "https://sho.rt/x",
        )
    }

    #[test]
    fn each_format_writes_the_fields_in_order_and_escapes_text() {
        let answer = sample();
        assert_eq!(
            json(&answer.fields),
            "{\"status\":\"success\",\"url\":{\"keyword\":\"a<b&\\\"c\\u0001\u{fffe}\u{ffff}\"},\"statusCode\":200}"
        );
        assert_eq!(
            xml(&answer.fields),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<root><status>success</status>\
             <url><keyword>a&lt;b&amp;&quot;c</keyword></url><statusCode>200</statusCode></root>\n"
        );
        assert_eq!(answer.status(), StatusCode::OK);
    }

    #[test]
    fn the_status_is_status_code_else_error_code_else_200() {
        assert_eq!(
            Answer::error(StatusCode::FORBIDDEN, "no").status(),
            StatusCode::FORBIDDEN
        );
        let mut answer = sample();
        answer.fields.retain(|(name, _)| name != "statusCode");
        assert_eq!(answer.status(), StatusCode::OK);
    }

    #[test]
    fn formats_default_to_xml_and_jsonp_is_refused() {
        assert_eq!(Format::parse(None), Ok(Format::Xml));
        assert_eq!(Format::parse(Some("JSON")), Ok(Format::Json));
        assert_eq!(Format::parse(Some("simple")), Ok(Format::Simple));
        assert!(Format::parse(Some("jsonp")).is_err());
        assert!(
            Format::parse(Some("yaml"))
                .expect_err("unknown")
                .contains("\"yaml\"")
        );
    }
}
