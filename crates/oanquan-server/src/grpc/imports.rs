//! No file of [`super`] imports from a file that imports from it, directly or around a circle:
//! such a pair cannot be split, moved or understood apart. Read from the sources, so that a new
//! `use` closing a circle fails here rather than in review.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The files of the module at `dir`, by module path below `grpc` (`""` is `grpc/mod.rs`), with
/// what they import; files and test modules compiled only under `cfg(test)` are left out.
fn modules(dir: &Path, prefix: &str, out: &mut BTreeMap<String, String>) {
    let mut test_only = BTreeSet::new();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        if path.is_dir() {
            modules(&path, &join(prefix, &name), out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let module = if name == "mod" {
                prefix.to_owned()
            } else {
                join(prefix, &name)
            };
            let mut source = std::fs::read_to_string(&path).unwrap();
            if let Some(at) = source.find("#[cfg(test)]\nmod tests {") {
                source.truncate(at);
            }
            while let Some(at) = source.find("#[cfg(test)]\nmod ") {
                let end = at + source[at..].find(';').unwrap();
                let child = source[at..end].rsplit(' ').next().unwrap().to_owned();
                test_only.insert(join(prefix, &child));
                source.replace_range(at..=end, "");
            }
            files.push((module, source));
        }
    }
    for (module, source) in files {
        if !test_only.contains(&module) {
            out.insert(module, source);
        }
    }
    out.retain(|module, _| !test_only.contains(module));
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}::{name}")
    }
}

/// Splits `text` at the commas outside braces.
fn top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// The paths a `use` tree names: `a::{b, c::d}` → `a::b`, `a::c::d`.
fn flatten(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    match (tree.find('{'), tree.rfind('}')) {
        (Some(open), Some(close)) => top_level(&tree[open + 1..close])
            .into_iter()
            .flat_map(flatten)
            .map(|path| format!("{}{path}", &tree[..open]))
            .collect(),
        _ => vec![tree.split(" as ").next().unwrap().trim().to_owned()],
    }
}

/// Every path `source` imports, or names inline from `super` or `crate::grpc`.
fn paths(source: &str) -> Vec<String> {
    let code: String = source
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = Vec::new();
    for statement in code.split(';') {
        let statement = statement.trim();
        // `use` at the start of its line, maybe after `pub(...)`.
        if let Some((_, tree)) = statement.split_once("use ").filter(|(before, _)| {
            let line = before.rsplit('\n').next().unwrap_or_default().trim();
            line.is_empty() || line.starts_with("pub")
        }) {
            found.extend(flatten(tree));
        }
    }
    for start in ["super::", "crate::grpc::"] {
        for (at, _) in code.match_indices(start) {
            let path: String = code[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            // `super::{a, b}`: a `use` tree, read above.
            if !path.ends_with("::") {
                found.push(path);
            }
        }
    }
    found
}

/// The module of this crate's `grpc` that `path`, written in `module`, imports from, if any.
fn target(module: &str, path: &str, known: &BTreeMap<String, String>) -> Option<String> {
    let mut segments: Vec<&str> = path.split("::").filter(|s| *s != "self").collect();
    let mut base: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
    match segments.first().copied() {
        Some("crate") if segments.get(1) == Some(&"grpc") => {
            base.clear();
            segments.drain(..2);
        }
        Some("super") => {
            while segments.first() == Some(&"super") {
                segments.remove(0);
                base.pop();
            }
        }
        // A child of `module` (only a `mod.rs` has children).
        Some(first) if known.contains_key(&join(module, first)) => {}
        _ => return None,
    }
    base.extend(segments);
    (0..=base.len())
        .rev()
        .map(|n| base[..n].join("::"))
        .find(|candidate| known.contains_key(candidate))
        .filter(|found| found != module)
}

/// Some circle of imports among `edges`, if there is one.
fn circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.to_owned());
            return Some(circle);
        }
        if !done.insert(node.to_owned()) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, edges, done, path) {
                return Some(circle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|node| visit(node, edges, &mut done, &mut Vec::new()))
}

fn edges(known: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    known
        .iter()
        .map(|(module, source)| {
            let targets = paths(source)
                .iter()
                .filter_map(|path| target(module, path, known))
                .collect();
            (module.clone(), targets)
        })
        .collect()
}

#[test]
fn no_file_of_grpc_imports_from_one_that_imports_from_it() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/grpc");
    let mut known = BTreeMap::new();
    modules(&dir, "", &mut known);
    assert!(known.contains_key("wire") && known.contains_key("stream"));
    assert!(
        !known.contains_key("imports"),
        "test-only files are left out"
    );
    let edges = edges(&known);
    assert!(edges["wire"].contains("game_service"), "{edges:?}");
    if let Some(circle) = circle(&edges) {
        panic!("import circle: {}", circle.join(" → "));
    }
}

#[test]
fn a_circle_is_found() {
    let mut known = BTreeMap::new();
    known.insert(String::new(), "mod a;\nmod b;\npub use a::X;".to_owned());
    known.insert("a".to_owned(), "use super::{b::{self, Y}, c};".to_owned());
    known.insert("b".to_owned(), "fn f() { crate::grpc::a::g() }".to_owned());
    known.insert("c".to_owned(), "use std::fmt;".to_owned());
    let edges = edges(&known);
    assert_eq!(edges["a"], BTreeSet::from(["b".to_owned(), "c".to_owned()]));
    assert_eq!(edges[""], BTreeSet::from(["a".to_owned()]));
    let circle = circle(&edges).expect("a → b → a");
    assert_eq!(circle.first(), circle.last());
    assert!(circle.contains(&"a".to_owned()) && circle.contains(&"b".to_owned()));
}
