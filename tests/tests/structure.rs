//! The shape the services keep, checked on their sources: no function (outside tests) longer
//! than 120 lines; the shortener's transports (`http/`, `grpc/`) never name the store and its
//! metrics never name another part; no test tree silences dead code. docs/design.md explains
//! why each holds.

use std::path::{Path, PathBuf};

/// The longest a function outside tests may be, in lines.
const MAX_FUNCTION_LINES: usize = 120;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, recursively.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The name and line count of each function in `text` outside a `#[cfg(test)]` module,
/// found by matching braces (string and char literals holding braces are rare enough in
/// this code base that a miscount shows up as a test failure to look at, not a silent pass).
fn functions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_start();
        if line.starts_with("#[cfg(test)]")
            && lines
                .get(i + 1)
                .is_some_and(|next| next.trim_start().starts_with("mod "))
        {
            break;
        }
        let Some(name) = function_name(line) else {
            i += 1;
            continue;
        };
        let (mut depth, mut opened, mut end) = (0i64, false, None);
        for (j, body) in lines.iter().enumerate().skip(i) {
            for c in body.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if opened && depth == 0 {
                end = Some(j);
                break;
            }
            if !opened && body.trim_end().ends_with(';') {
                break;
            }
        }
        match end {
            Some(end) => {
                found.push((name, end - i + 1));
                i = end + 1;
            }
            None => i += 1,
        }
    }
    found
}

/// The name of the function `line` declares, if it declares one.
fn function_name(line: &str) -> Option<String> {
    let mut rest = line;
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "async ",
        "const ",
        "unsafe ",
    ] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

#[test]
fn no_function_outside_tests_is_longer_than_120_lines() {
    let root = workspace();
    let mut long = Vec::new();
    for crate_dir in ["shortener/src", "id-service/src"] {
        for path in sources(&root.join(crate_dir)) {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name == "tests.rs" || path.components().any(|c| c.as_os_str() == "tests") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read");
            for (function, lines) in functions(&text) {
                if lines > MAX_FUNCTION_LINES {
                    long.push(format!("{}: {function} ({lines} lines)", path.display()));
                }
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines: {long:#?}"
    );
}

#[test]
fn the_function_counter_counts_what_it_should() {
    let text = "fn short() {\n    1;\n}\n\npub async fn longer(x: u8) -> u8 {\n    if x > 1 {\n        x\n    } else {\n        0\n    }\n}\nfn declared();\n#[cfg(test)]\nmod tests {\n    fn skipped() {}\n}\n";
    assert_eq!(
        functions(text),
        [("short".to_string(), 3), ("longer".to_string(), 7)]
    );
}

#[test]
fn transports_never_name_the_store_and_metrics_name_no_other_part() {
    let root = workspace().join("shortener/src");
    let mut found = Vec::new();
    for (dir, forbidden) in [
        ("http", &["crate::store"][..]),
        ("grpc", &["crate::store"][..]),
        ("metrics", &["crate::"][..]),
    ] {
        for path in sources(&root.join(dir)) {
            let text = std::fs::read_to_string(&path).expect("read");
            for (number, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                // The metrics module may name itself.
                let own = code.contains("crate::metrics");
                if forbidden.iter().any(|f| code.contains(f)) && !own {
                    found.push(format!(
                        "{}:{}: {}",
                        path.display(),
                        number + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn no_test_tree_silences_dead_code() {
    let root = workspace();
    let mut found = Vec::new();
    for dir in [
        "shortener/tests",
        "id-service/tests",
        "tests/src",
        "tests/tests",
        "testkit/src",
    ] {
        for path in sources(&root.join(dir)) {
            let text = std::fs::read_to_string(&path).expect("read");
            let needle = ["allow(", "dead_code)"].concat();
            if text.contains(&needle) {
                found.push(path.display().to_string());
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// The shortener's top-level modules each module's code (not its comments or tests) names.
fn module_graph() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let root = workspace().join("shortener/src");
    let mut graph = std::collections::BTreeMap::<String, std::collections::BTreeSet<String>>::new();
    for path in sources(&root) {
        let relative = path.strip_prefix(&root).expect("under src");
        let first = relative.components().next().expect("a component");
        let module = first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        let code = text.split("#[cfg(test)]\nmod").next().unwrap_or("");
        for line in code.lines() {
            let line = line.split("//").next().unwrap_or("");
            for (i, _) in line.match_indices("crate::") {
                let named: String = line[i + 7..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !named.is_empty() && named != module {
                    graph.entry(module.clone()).or_default().insert(named);
                }
            }
        }
    }
    graph
}

#[test]
fn the_shortener_modules_depend_on_each_other_without_a_cycle() {
    let graph = module_graph();
    // Depth-first search; a module met again while still on the path closes a cycle.
    fn visit(
        module: &str,
        graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut std::collections::BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|m| m == module) {
            let mut cycle = path[start..].to_vec();
            cycle.push(module.to_string());
            return Some(cycle);
        }
        if !done.insert(module.to_string()) {
            return None;
        }
        path.push(module.to_string());
        for next in graph.get(module).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = std::collections::BTreeSet::new();
    for module in graph.keys() {
        let cycle = visit(module, &graph, &mut Vec::new(), &mut done);
        assert!(
            cycle.is_none(),
            "a module cycle: {}",
            cycle.unwrap_or_default().join(" -> ")
        );
    }
    assert!(graph.len() > 10, "{graph:?}");
}
