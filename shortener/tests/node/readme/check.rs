//! Holds what README.md's HTTP API section says ([`Section`]) to the OpenAPI document, and
//! lists every difference as one line that names the README line and what to fix.

use super::section::{Row, Section};
use super::shape::{Field, Shape};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// An object schema, with `$ref`s followed and `allOf` parts merged.
struct Object<'a> {
    properties: BTreeMap<&'a str, &'a Value>,
    required: BTreeSet<&'a str>,
}

/// The OpenAPI document and the README's named bodies, while checking.
struct Checker<'a> {
    doc: &'a Value,
    definitions: BTreeMap<&'a str, (&'a Shape, usize)>,
    used: BTreeSet<&'a str>,
    problems: Vec<String>,
}

/// Every difference between `section` and the OpenAPI document `doc`; empty when they agree.
pub fn check(section: &Section, doc: &Value) -> Vec<String> {
    let mut checker = Checker {
        doc,
        definitions: section
            .definitions
            .iter()
            .map(|(name, shape, line)| (name.as_str(), (shape, *line)))
            .collect(),
        used: BTreeSet::new(),
        problems: Vec::new(),
    };
    let mut named = BTreeSet::new();
    for row in &section.rows {
        checker.row(row);
        for operation in &row.operations {
            named.insert((operation.method.to_lowercase(), operation.path.clone()));
        }
    }
    for (method, path) in checker.operations() {
        if !named.contains(&(method.clone(), path.clone())) {
            checker.problems.push(format!(
                "README.md's HTTP API table does not name `{} {path}`, which the OpenAPI document has",
                method.to_uppercase()
            ));
        }
    }
    for (name, _, line) in &section.definitions {
        if !checker.used.contains(name.as_str()) {
            checker.problems.push(format!(
                "README.md:{line}: `{name}` is defined but no answer or request is shown as one"
            ));
        }
    }
    for (status, codes, line) in &section.errors {
        let known = checker.error_codes(status);
        for code in codes {
            if !known.contains(code.as_str()) {
                checker.problems.push(format!(
                    "README.md:{line}: no operation answers `{status} {code}` in the OpenAPI document"
                ));
            }
        }
    }
    let mut seen = BTreeSet::new();
    checker.problems.retain(|p| seen.insert(p.clone()));
    checker.problems
}

impl<'a> Checker<'a> {
    fn row(&mut self, row: &'a Row) {
        let at = format!("README.md:{}", row.line);
        let mut found = Vec::new();
        for operation in &row.operations {
            let name = format!("{} {}", operation.method, operation.path);
            let Some(op) = self.operation(&operation.method, &operation.path) else {
                self.problems
                    .push(format!("{at}: `{name}` is not in the OpenAPI document"));
                continue;
            };
            found.push(op);
            let parameters = self.parameters(&operation.method, &operation.path);
            for (param, values) in &operation.query {
                let Some(schema) = parameters.get(param.as_str()) else {
                    self.problems.push(format!(
                        "{at}: `{name}` has no query parameter `{param}` in the OpenAPI document"
                    ));
                    continue;
                };
                if let Some(allowed) = self.resolve(schema).get("enum").and_then(Value::as_array) {
                    for value in values {
                        if !allowed.iter().any(|a| a.as_str() == Some(value.as_str())) {
                            self.problems.push(format!(
                                "{at}: `{name}` does not take `{param}={value}` (the document allows {allowed:?})"
                            ));
                        }
                    }
                }
            }
            if let Some(body) = &operation.body {
                match json_schema(self.resolve(&op["requestBody"])) {
                    Some(schema) => {
                        self.shape(body, schema, &format!("{at}: the body of `{name}`"))
                    }
                    None => self.problems.push(format!(
                        "{at}: `{name}` takes no JSON body in the OpenAPI document"
                    )),
                }
            }
        }
        for answer in &row.answers {
            let answering: Vec<&Value> = found
                .iter()
                .map(|op| self.resolve(&op["responses"][answer.status.as_str()]))
                .filter(|response| !response.is_null())
                .collect();
            if answering.is_empty() && !found.is_empty() {
                self.problems.push(format!(
                    "{at}: no operation of the row answers `{}` in the OpenAPI document",
                    answer.status
                ));
            }
            for (body, response) in answer
                .bodies
                .iter()
                .flat_map(|body| answering.iter().map(move |response| (body, *response)))
            {
                match json_schema(response) {
                    Some(schema) => self.shape(
                        body,
                        schema,
                        &format!("{at}: the `{}` answer", answer.status),
                    ),
                    None => self.problems.push(format!(
                        "{at}: the `{}` answer has no JSON body in the OpenAPI document",
                        answer.status
                    )),
                }
            }
        }
    }

    /// Holds `shape` to `schema`; `place` says where the shape is, for the messages.
    /// A schema of alternatives (`oneOf`, `anyOf`) matches when one alternative does; when none
    /// does, the problems are those of the closest one.
    fn shape(&mut self, shape: &'a Shape, schema: &'a Value, place: &str) {
        let resolved = self.resolve(schema);
        let alternatives = resolved.get("oneOf").or_else(|| resolved.get("anyOf"));
        if let Some(alternatives) = alternatives.and_then(Value::as_array) {
            let mut closest: Option<Vec<String>> = None;
            for alternative in alternatives {
                let before = self.problems.len();
                self.shape(shape, alternative, place);
                let found: Vec<String> = self.problems.drain(before..).collect();
                if found.is_empty() {
                    return;
                }
                if closest.as_ref().is_none_or(|c| found.len() < c.len()) {
                    closest = Some(found);
                }
            }
            self.problems.extend(closest.unwrap_or_default());
            return;
        }
        match shape {
            Shape::Elided => {}
            // Problems of a definition name its own line, so each is told once.
            Shape::Named(name) => match self.definitions.get(name.as_str()).copied() {
                Some((defined, line)) => {
                    self.used.insert(name.as_str());
                    self.shape(defined, schema, &format!("README.md:{line}: a `{name}`"));
                }
                None => self.problems.push(format!(
                    "{place}: `{name}` is defined nowhere in the section"
                )),
            },
            Shape::Array(items) => {
                let schema = self.resolve(schema);
                if schema["type"] != "array" {
                    self.problems.push(format!(
                        "{place}: shown as an array, but the schema is not one"
                    ));
                    return;
                }
                self.shape(items, &schema["items"], &format!("{place}, its items"));
            }
            Shape::Object { fields, open } => {
                let Some(object) = self.object(schema) else {
                    self.problems.push(format!(
                        "{place}: shown as an object, but the schema has no fields"
                    ));
                    return;
                };
                self.fields(fields, *open, &object, place);
            }
        }
    }

    fn fields(&mut self, fields: &'a [Field], open: bool, object: &Object<'a>, place: &str) {
        let fields_of = object
            .properties
            .keys()
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        for field in fields {
            let name = field.name.as_str();
            let Some(&schema) = object.properties.get(name) else {
                self.problems.push(format!(
                    "{place}: names `{name}`, which the schema lacks (it has {fields_of})"
                ));
                continue;
            };
            let required = object.required.contains(name);
            if field.optional && required {
                self.problems.push(format!(
                    "{place}: marks `{name}` optional (`?`), but the schema requires it"
                ));
            } else if !field.optional && !required {
                self.problems.push(format!(
                    "{place}: `{name}` is optional in the schema; mark it `\"{name}\"?`"
                ));
            }
            if let Some(value) = &field.value {
                self.shape(value, schema, &format!("{place}, field `{name}`"));
            }
        }
        if !open {
            let shown: BTreeSet<&str> = fields.iter().map(|f| f.name.as_str()).collect();
            for name in object.properties.keys() {
                if !shown.contains(name) {
                    self.problems.push(format!(
                        "{place}: leaves out `{name}`, which the schema has (list it, or add `...`)"
                    ));
                }
            }
        }
    }

    /// Follows `$ref`s (`#/components/...`) until a value that is not one.
    fn resolve(&self, mut value: &'a Value) -> &'a Value {
        for _ in 0..16 {
            let Some(reference) = value.get("$ref").and_then(Value::as_str) else {
                return value;
            };
            let pointer = reference.trim_start_matches('#');
            value = self.doc.pointer(pointer).unwrap_or(&Value::Null);
        }
        value
    }

    fn object(&self, schema: &'a Value) -> Option<Object<'a>> {
        let schema = self.resolve(schema);
        let mut object = Object {
            properties: BTreeMap::new(),
            required: BTreeSet::new(),
        };
        if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
            for part in parts {
                let part = self.object(part)?;
                object.properties.extend(part.properties);
                object.required.extend(part.required);
            }
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            object
                .properties
                .extend(properties.iter().map(|(k, v)| (k.as_str(), v)));
        }
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            object
                .required
                .extend(required.iter().filter_map(Value::as_str));
        }
        (!object.properties.is_empty()).then_some(object)
    }

    fn operation(&self, method: &str, path: &str) -> Option<&'a Value> {
        self.doc["paths"]
            .get(path)?
            .get(method.to_lowercase().as_str())
    }

    /// The query parameters of an operation (its own and its path's), by name.
    fn parameters(&self, method: &str, path: &str) -> BTreeMap<&'a str, &'a Value> {
        let item = &self.doc["paths"][path];
        let own = &item[method.to_lowercase().as_str()]["parameters"];
        [&item["parameters"], own]
            .into_iter()
            .filter_map(Value::as_array)
            .flatten()
            .map(|p| self.resolve(p))
            .filter(|p| p["in"] == "query")
            .filter_map(|p| Some((p["name"].as_str()?, &p["schema"])))
            .collect()
    }

    /// Every operation of the document, as (lowercase method, path).
    fn operations(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (path, item) in self.doc["paths"].as_object().into_iter().flatten() {
            for method in item.as_object().into_iter().flatten().map(|(m, _)| m) {
                if method != "parameters" && method != "summary" && method != "description" {
                    out.push((method.clone(), path.clone()));
                }
            }
        }
        out
    }

    /// The error codes any operation answers with `status`: those its schema enumerates for
    /// `error`, and those its description names in backticks.
    fn error_codes(&self, status: &str) -> BTreeSet<String> {
        let mut codes = BTreeSet::new();
        for (method, path) in self.operations() {
            let Some(op) = self.operation(&method, &path) else {
                continue;
            };
            let response = self.resolve(&op["responses"][status]);
            if let Some(description) = response["description"].as_str() {
                codes.extend(
                    description
                        .split('`')
                        .skip(1)
                        .step_by(2)
                        .map(str::to_string),
                );
            }
            let error = json_schema(response)
                .and_then(|schema| self.object(schema))
                .and_then(|object| object.properties.get("error").copied());
            if let Some(values) = error.and_then(|e| e["enum"].as_array()) {
                codes.extend(values.iter().filter_map(Value::as_str).map(str::to_string));
            }
        }
        codes
    }
}

/// The schema of a request body's or a response's JSON content (`application/json`, or another
/// `+json` type such as `application/merge-patch+json`).
fn json_schema(body: &Value) -> Option<&Value> {
    let content = body.get("content")?.as_object()?;
    content
        .get("application/json")
        .or_else(|| {
            content
                .iter()
                .find(|(media, _)| media.ends_with("+json"))
                .map(|(_, v)| v)
        })?
        .get("schema")
}
