//! The daemon crate's modules depend on each other one way only: `src/lib.rs` lists them top to
//! bottom, and no module may name (`crate::x`, `super::…` excluded) a module listed above it.
//! A cycle here is what made the wiring hard to follow; this keeps it from coming back.

use std::{collections::BTreeMap, path::Path};

/// The top-level modules of `src/`, from the top layer down, as `src/lib.rs` documents them.
/// Modules on one line are peers: they may not use each other either.
const LAYERS: &[&[&str]] = &[
    &["commands"],
    &["cli"],
    &["daemon", "logging"],
    &["fleet", "standalone"],
    &["node"],
    &["debug", "kube_api", "cri", "host", "machine", "volume"],
    &["config"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// Every `crate::<module>` a file names, with the line it is on.
fn crate_references(text: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.push((name, number + 1));
            }
            rest = after;
        }
        // `use crate::{a, b::c}`: the names inside the braces.
        if let Some(at) = code.find("crate::{") {
            let inside = &code[at + "crate::{".len()..];
            for part in inside.split(',') {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.push((name, number + 1));
                }
            }
        }
    }
    found
}

/// `use crate::{` blocks that span lines: the first path segment of each line inside.
fn multiline_use_blocks(text: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    let mut inside = false;
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with("use crate::{") && !trimmed.ends_with("};") {
            inside = true;
            continue;
        }
        if inside {
            if trimmed.starts_with('}') {
                inside = false;
                continue;
            }
            let name: String = trimmed
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.push((name, number + 1));
            }
        }
    }
    found
}

fn rust_files(directory: &Path, into: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(directory).expect("a readable source directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            into.push(path);
        }
    }
}

#[test]
fn the_daemon_modules_depend_on_each_other_one_way() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&source, &mut files);
    let mut modules_seen = BTreeMap::new();
    let mut violations = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&source).expect("under src");
        let module = relative
            .components()
            .next()
            .and_then(|component| component.as_os_str().to_str())
            .map(|name| name.trim_end_matches(".rs").to_owned())
            .expect("a module");
        if module == "lib" || module == "main" {
            continue;
        }
        let Some(own_layer) = layer_of(&module) else {
            violations.push(format!(
                "{}: module {module} is in no layer of this test (add it where it belongs)",
                relative.display()
            ));
            continue;
        };
        *modules_seen.entry(module.clone()).or_insert(0) += 1;
        let text = std::fs::read_to_string(file).expect("a readable file");
        let mut references = crate_references(&text);
        references.extend(multiline_use_blocks(&text));
        for (used, line) in references {
            if used == module || used == "self" || used == "super" {
                continue;
            }
            match layer_of(&used) {
                Some(layer) if layer > own_layer => {}
                Some(_) => violations.push(format!(
                    "{}:{line}: {module} uses {used}, which is not below it",
                    relative.display()
                )),
                None => {}
            }
        }
    }
    assert!(
        modules_seen.len() >= 10,
        "the scan found the daemon's modules: {modules_seen:?}"
    );
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn the_scan_sees_every_form_of_a_crate_path() {
    let text = "use crate::{\n    config::Settings,\n    node::NodeActors,\n};\nuse crate::{debug, fleet::Fleet};\nlet x = crate::daemon::run(); // crate::ignored\n";
    let mut names: Vec<String> = crate_references(text)
        .into_iter()
        .chain(multiline_use_blocks(text))
        .map(|(name, _)| name)
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names, ["config", "daemon", "debug", "fleet", "node"]);
}
