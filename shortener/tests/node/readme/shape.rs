//! The README's notation for JSON bodies: field names in braces, `?` after a field that may be
//! left out, `"name": <shape>` for a field whose own fields are shown, `[<shape>]` for an array,
//! a bare word (`link`) for a body the README defines once, `...` for what is not spelled out,
//! and `(comments)` anywhere between them.
//!
//! `{"url", "alias"? (RFC 3339), "clicks": {"human"}, "links": [link], "more": [...]}`

/// A body as the README shows it.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// An object and the fields shown; `open` when a `...` says more are left out.
    Object { fields: Vec<Field>, open: bool },
    /// An array whose items have this shape.
    Array(Box<Shape>),
    /// A body the README defines once under this name (`A `link` is ...`).
    Named(String),
    /// `...`: not spelled out, so not checked.
    Elided,
}

/// One field of an object shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The field's JSON name.
    pub name: String,
    /// Marked `?`: a request may leave it out, or an answer may lack it.
    pub optional: bool,
    /// Its own shape, when the README shows one.
    pub value: Option<Shape>,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open(char),
    Close(char),
    Comma,
    Colon,
    Question,
    Ellipsis,
    Str(String),
    Word(String),
}

/// Whether a backticked span is meant as a body shape (rather than a header, a scope or a
/// value): it opens with `{` or `[`, or it is one of the `names` the README defines.
pub fn looks_like_shape(span: &str, names: &[String]) -> bool {
    span.starts_with('{') || span.starts_with('[') || names.iter().any(|n| n == span)
}

/// Parses one shape; the whole of `text` must be that shape.
pub fn parse(text: &str) -> Result<Shape, String> {
    let tokens = tokenize(text)?;
    let mut at = 0;
    let shape = value(&tokens, &mut at).map_err(|e| format!("{e} in `{text}`"))?;
    if at != tokens.len() {
        return Err(format!("text after the shape in `{text}`"));
    }
    Ok(shape)
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '(' => {
                // A comment; parentheses nest.
                let mut depth = 0;
                loop {
                    match chars.get(i) {
                        Some('(') => depth += 1,
                        Some(')') => depth -= 1,
                        Some(_) => {}
                        None => return Err(format!("unclosed `(` in `{text}`")),
                    }
                    i += 1;
                    if depth == 0 {
                        break;
                    }
                }
            }
            '{' | '[' => {
                tokens.push(Token::Open(c));
                i += 1;
            }
            '}' | ']' => {
                tokens.push(Token::Close(c));
                i += 1;
            }
            ',' => {
                tokens.push(Token::Comma);
                i += 1;
            }
            ':' => {
                tokens.push(Token::Colon);
                i += 1;
            }
            '?' => {
                tokens.push(Token::Question);
                i += 1;
            }
            '.' if chars[i..].starts_with(&['.', '.', '.']) => {
                tokens.push(Token::Ellipsis);
                i += 3;
            }
            '"' => {
                let end = chars[i + 1..]
                    .iter()
                    .position(|&c| c == '"')
                    .ok_or_else(|| format!("unclosed `\"` in `{text}`"))?;
                tokens.push(Token::Str(chars[i + 1..i + 1 + end].iter().collect()));
                i += end + 2;
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let end = chars[i..]
                    .iter()
                    .position(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
                    .unwrap_or(chars.len() - i);
                tokens.push(Token::Word(chars[i..i + end].iter().collect()));
                i += end;
            }
            other => return Err(format!("unexpected `{other}` in `{text}`")),
        }
    }
    Ok(tokens)
}

fn value(tokens: &[Token], at: &mut usize) -> Result<Shape, String> {
    let token = tokens.get(*at).ok_or("a shape ends early")?;
    *at += 1;
    match token {
        Token::Open('{') => object(tokens, at),
        Token::Open('[') => {
            let items = value(tokens, at)?;
            expect(tokens, at, &Token::Close(']'))?;
            Ok(Shape::Array(Box::new(items)))
        }
        Token::Ellipsis => Ok(Shape::Elided),
        Token::Word(name) => Ok(Shape::Named(name.clone())),
        other => Err(format!("expected a shape, found {other:?}")),
    }
}

fn object(tokens: &[Token], at: &mut usize) -> Result<Shape, String> {
    let mut fields = Vec::new();
    let mut open = false;
    if tokens.get(*at) == Some(&Token::Close('}')) {
        *at += 1;
        return Ok(Shape::Object { fields, open });
    }
    loop {
        match tokens.get(*at) {
            Some(Token::Ellipsis) => {
                *at += 1;
                open = true;
            }
            Some(Token::Str(name)) => {
                *at += 1;
                let mut field = Field {
                    name: name.clone(),
                    optional: false,
                    value: None,
                };
                if tokens.get(*at) == Some(&Token::Question) {
                    *at += 1;
                    field.optional = true;
                }
                if tokens.get(*at) == Some(&Token::Colon) {
                    *at += 1;
                    field.value = Some(value(tokens, at)?);
                }
                fields.push(field);
            }
            other => return Err(format!("expected a field name or `...`, found {other:?}")),
        }
        match tokens.get(*at) {
            Some(Token::Comma) => *at += 1,
            Some(Token::Close('}')) => {
                *at += 1;
                return Ok(Shape::Object { fields, open });
            }
            other => return Err(format!("expected `,` or `}}`, found {other:?}")),
        }
    }
}

fn expect(tokens: &[Token], at: &mut usize, want: &Token) -> Result<(), String> {
    if tokens.get(*at) == Some(want) {
        *at += 1;
        Ok(())
    } else {
        Err(format!("expected {want:?}, found {:?}", tokens.get(*at)))
    }
}

#[test]
fn shapes_parse_with_optional_fields_nested_bodies_names_and_comments() {
    let shape = parse(r#"{"url", "expires_at"? (RFC 3339), "clicks": {"human"}, "links": [link], "more": [...], ...}"#)
        .expect("parse");
    let Shape::Object { fields, open } = shape else {
        panic!("not an object: {shape:?}");
    };
    assert!(open);
    let names: Vec<_> = fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["url", "expires_at", "clicks", "links", "more"]);
    assert!(!fields[0].optional && fields[1].optional);
    assert_eq!(
        fields[3].value,
        Some(Shape::Array(Box::new(Shape::Named("link".into()))))
    );
    assert_eq!(fields[4].value, Some(Shape::Array(Box::new(Shape::Elided))));
    for broken in [
        r#"{"url""#,
        r#"{"url" "alias"}"#,
        r#"{"url"} extra"#,
        r#"{url}"#,
    ] {
        assert!(parse(broken).is_err(), "{broken} parsed");
    }
}
