//! What README.md's "HTTP API" section says about the API: its table of requests and answers,
//! the bodies it defines once (a paragraph that starts "A `link` is") and its list of error
//! codes.
//!
//! Only backticked spans carry meaning; the prose around them is for people. In a table row's
//! request cell, `METHOD /path?query=a\|b` names an operation (a bare `METHOD` before it names
//! another on the same path) and a shape right after it is that operation's JSON body. In the
//! answer cell, `NNN` is a status the row's operations answer, and a shape after it is that
//! answer's JSON body (several shapes: alternatives the answer may take). In the "Error codes:"
//! paragraph, `NNN code | code` lists codes under their status.

use super::shape::{self, Shape};

/// The HTTP methods a row may name.
const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// The section, parsed.
#[derive(Debug, Default)]
pub struct Section {
    /// The table's rows.
    pub rows: Vec<Row>,
    /// The bodies defined once by name (`link`), with the line of their definition.
    pub definitions: Vec<(String, Shape, usize)>,
    /// The error codes listed under each status, with their line.
    pub errors: Vec<(String, Vec<String>, usize)>,
}

/// One row of the table.
#[derive(Debug)]
pub struct Row {
    /// Its line in README.md (1-based).
    pub line: usize,
    /// The operations its request cell names.
    pub operations: Vec<Operation>,
    /// The answers its response cell names.
    pub answers: Vec<Answer>,
}

/// An operation as a row names it.
#[derive(Debug)]
pub struct Operation {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path template, as in the OpenAPI document (`/api/v1/links/{code}`).
    pub path: String,
    /// Query parameters and the values shown for them (`format=json|csv`).
    pub query: Vec<(String, Vec<String>)>,
    /// The request body shown.
    pub body: Option<Shape>,
}

/// A status a row answers, and the body shown for it.
#[derive(Debug)]
pub struct Answer {
    /// The status code as written.
    pub status: String,
    /// The JSON bodies shown after it (one per alternative the answer may take).
    pub bodies: Vec<Shape>,
}

/// Finds and parses the "## HTTP API" section of `readme`.
pub fn parse(readme: &str) -> Result<Section, String> {
    let lines: Vec<&str> = readme.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim() == "## HTTP API")
        .ok_or("README.md has no `## HTTP API` section")?;
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.starts_with("## "))
        .map_or(lines.len(), |i| start + 1 + i);
    let mut section = Section::default();

    // Definitions first: a row may name a body before the paragraph that defines it.
    for (line, paragraph) in paragraphs(&lines, start, end) {
        if let Some(rest) = paragraph.strip_prefix("A `") {
            let (name, rest) = rest.split_once('`').ok_or("unclosed backtick")?;
            let Some(rest) = rest.strip_prefix(" is ") else {
                continue;
            };
            let spans = spans(rest);
            let first = spans
                .first()
                .ok_or_else(|| format!("README.md:{line}: `{name}` is defined by no shape"))?;
            let shape = shape::parse(first).map_err(|e| format!("README.md:{line}: {e}"))?;
            section.definitions.push((name.to_string(), shape, line));
        } else if paragraph.starts_with("Error codes:") {
            for span in spans(&paragraph) {
                let Some((status, codes)) = span.split_once(' ') else {
                    continue;
                };
                if is_status(status) {
                    let codes = codes.split('|').map(|c| c.trim().to_string()).collect();
                    section.errors.push((status.to_string(), codes, line));
                }
            }
        }
    }
    let names: Vec<String> = section.definitions.iter().map(|d| d.0.clone()).collect();

    let table: Vec<(usize, &str)> = (start..end)
        .filter(|&i| lines[i].starts_with('|'))
        .map(|i| (i + 1, lines[i]))
        .collect();
    let Some(((_, header), rest)) = table.split_first() else {
        return Err("the HTTP API section has no table".into());
    };
    if !header.contains("request") || !header.contains("response") {
        return Err(format!("unexpected table header {header}"));
    }
    for &(line, text) in rest.iter().skip(1) {
        let cells = cells(text);
        let [request, response] = cells.as_slice() else {
            return Err(format!(
                "README.md:{line}: expected two cells, found {cells:?}"
            ));
        };
        let row = Row {
            line,
            operations: operations(request, &names)
                .map_err(|e| format!("README.md:{line}: {e}"))?,
            answers: answers(response, &names).map_err(|e| format!("README.md:{line}: {e}"))?,
        };
        if row.operations.is_empty() {
            return Err(format!("README.md:{line}: the row names no operation"));
        }
        section.rows.push(row);
    }
    Ok(section)
}

/// The paragraphs of `lines[start..end]` outside the table, joined into one line each, with the
/// line each starts on (1-based).
fn paragraphs(lines: &[&str], start: usize, end: usize) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in lines.iter().enumerate().take(end).skip(start + 1) {
        if line.trim().is_empty() || line.starts_with('|') {
            out.extend(current.take());
        } else if let Some((_, text)) = current.as_mut() {
            text.push(' ');
            text.push_str(line.trim());
        } else {
            current = Some((i + 1, line.trim().to_string()));
        }
    }
    out.extend(current);
    out
}

/// The cells of a table row, split at `|` but not at `\|`.
fn cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cells.last_mut().expect("a cell").push('|');
                chars.next();
            }
            '|' => cells.push(String::new()),
            c => cells.last_mut().expect("a cell").push(c),
        }
    }
    cells.iter().map(|c| c.trim().to_string()).collect()
}

/// The backticked spans of `text`, in order.
fn spans(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(|s| s.trim().to_string())
        .collect()
}

fn is_status(text: &str) -> bool {
    text.len() == 3 && text.bytes().all(|b| b.is_ascii_digit())
}

fn operations(cell: &str, names: &[String]) -> Result<Vec<Operation>, String> {
    let mut operations: Vec<Operation> = Vec::new();
    // Operations named by the last path span: a body shown after it belongs to them.
    let mut last = 0..0;
    let mut pending: Vec<String> = Vec::new();
    for span in spans(cell) {
        if METHODS.contains(&span.as_str()) {
            pending.push(span);
        } else if let Some((method, target)) = span.split_once(' ')
            && METHODS.contains(&method)
            && target.starts_with('/')
        {
            pending.push(method.to_string());
            let (path, query) = target.split_once('?').unwrap_or((target, ""));
            let query = query
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|pair| {
                    let (name, values) = pair.split_once('=').unwrap_or((pair, ""));
                    let values = values
                        .split('|')
                        .filter(|v| !v.is_empty())
                        .map(str::to_string)
                        .collect();
                    (name.to_string(), values)
                })
                .collect::<Vec<_>>();
            let first = operations.len();
            for method in pending.drain(..) {
                operations.push(Operation {
                    method,
                    path: path.to_string(),
                    query: query.clone(),
                    body: None,
                });
            }
            last = first..operations.len();
        } else if shape::looks_like_shape(&span, names) {
            if last.is_empty() {
                return Err(format!("the body `{span}` follows no operation"));
            }
            let body = shape::parse(&span)?;
            for operation in &mut operations[last.clone()] {
                if operation.body.is_some() {
                    return Err(format!("a second body `{span}` for one operation"));
                }
                operation.body = Some(body.clone());
            }
        }
    }
    if !pending.is_empty() {
        return Err(format!("{pending:?} name no path"));
    }
    Ok(operations)
}

fn answers(cell: &str, names: &[String]) -> Result<Vec<Answer>, String> {
    let mut answers: Vec<Answer> = Vec::new();
    for span in spans(cell) {
        if is_status(&span) {
            answers.push(Answer {
                status: span,
                bodies: Vec::new(),
            });
        } else if shape::looks_like_shape(&span, names) {
            let answer = answers
                .last_mut()
                .ok_or_else(|| format!("the body `{span}` follows no status"))?;
            answer.bodies.push(shape::parse(&span)?);
        }
    }
    Ok(answers)
}
