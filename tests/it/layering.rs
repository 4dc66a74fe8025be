//! The daemon crate's modules depend on each other one way only: `src/lib.rs` lists them top to
//! bottom, and no module may name (`crate::x`, `super::…` excluded) a module listed above it.
//! A cycle here is what made the wiring hard to follow; this keeps it from coming back. The
//! actors crate's rooms too: the pods on top, the ports and small helpers at the bottom; and the
//! CRI crate's: the engine and the client side by side over the gRPC transport, the actors
//! crate never naming either, and the engine's own files importing one another without a cycle.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

/// The top-level modules of `src/`, from the top layer down, as `src/lib.rs` documents them.
/// Modules on one line are peers: they may not use each other either.
const LAYERS: &[&[&str]] = &[
    &["commands"],
    &["cli"],
    &["daemon", "logging"],
    &["fleet", "standalone"],
    &["node"],
    // The debug endpoint shows the kubelet API's streams; the API never reads the endpoint.
    &["debug"],
    &["kubelet_server"],
    &[
        "apiserver_client",
        "probe_handlers",
        "host",
        "machine",
        "volume_plugins",
    ],
    &["config", "heap", "listen"],
    &["proc_stats"],
];

/// The top-level modules of `actors/src/`, from the top room down. The pods' provider drives
/// the other actors' messages and reads their views; the actors use the messages, the messages
/// carry the ports' types, and the ports sit on the small pure helpers.
const ACTOR_LAYERS: &[&[&str]] = &[
    &["pods"],
    &[
        "node_status",
        "prober",
        "volume_manager",
        "status_manager",
        "lease",
    ],
    &["eviction", "runtime_probe"],
    &["image_gc", "log_rotation"],
    &["messages"],
    &["ports"],
    &[
        "clock",
        "config_source",
        "expansion",
        "go_duration",
        "kept_pod",
        "kubelet_metrics",
        "quantity",
        "retry",
        "shrink",
    ],
];

/// The top-level modules of `cri/src/`. The engine (`provider`) reaches the runtime only
/// through the actors crate's `ContainerRuntime` port, which the client implements: neither
/// names the other. Both sit on the unary gRPC transport.
const CRI_LAYERS: &[&[&str]] = &[&["provider", "client"], &["grpc"]];

fn layer_of(layers: &[&[&str]], module: &str) -> Option<usize> {
    layers.iter().position(|layer| layer.contains(&module))
}

/// The identifier `text` starts with (after blanks), if any.
fn leading_ident(text: &str) -> String {
    text.trim_start()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// Every module a file names through `crate::` (`crate::x::…`, and each first segment of a
/// `crate::{x, y::{…}}` group, over as many lines as it spans), with the line it is on.
/// Comments are left out.
fn crate_references(text: &str) -> Vec<(String, usize)> {
    references(text, "crate::")
}

/// [`crate_references`] through any path `prefix` (`crate::`, `super::`).
fn references(text: &str, prefix: &str) -> Vec<(String, usize)> {
    let code: String = text
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let line_of = |offset: usize| code[..offset].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(prefix) {
        let start = from + at + prefix.len();
        from = start;
        if !code[start..].starts_with('{') {
            let name = leading_ident(&code[start..]);
            if !name.is_empty() {
                found.push((name, line_of(start)));
            }
            continue;
        }
        // A group: the first segment of each item at its top level.
        let mut depth = 0;
        let mut item_start = start + 1;
        for (offset, c) in code[start..].char_indices() {
            let here = start + offset;
            match c {
                '{' => depth += 1,
                '}' | ',' if depth == 1 => {
                    let name = leading_ident(&code[item_start..here]);
                    if !name.is_empty() {
                        let blank = code[item_start..here].len()
                            - code[item_start..here].trim_start().len();
                        found.push((name, line_of(item_start + blank)));
                    }
                    item_start = here + 1;
                    if c == '}' {
                        break;
                    }
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
    }
    found
}

/// Every `.rs` file under `directory` (`string_errors` scans the same way).
pub(super) fn rust_files(directory: &Path, into: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(directory).expect("a readable source directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            into.push(path);
        }
    }
}

/// Every use of a module not below its user, in the crate whose sources are at `crate_src`;
/// how many modules were seen.
fn violations(crate_src: &Path, layers: &[&[&str]]) -> (Vec<String>, usize) {
    let mut files = Vec::new();
    rust_files(crate_src, &mut files);
    let mut modules_seen = BTreeMap::new();
    let mut violations = Vec::new();
    for file in &files {
        let relative = file
            .strip_prefix(crate_src)
            .expect("under the source directory");
        let module = relative
            .components()
            .next()
            .and_then(|component| component.as_os_str().to_str())
            .map(|name| name.trim_end_matches(".rs").to_owned())
            .expect("a module");
        if module == "lib" || module == "main" {
            continue;
        }
        let Some(own_layer) = layer_of(layers, &module) else {
            violations.push(format!(
                "{}: module {module} is in no layer of this test (add it where it belongs)",
                relative.display()
            ));
            continue;
        };
        *modules_seen.entry(module.clone()).or_insert(0) += 1;
        let text = std::fs::read_to_string(file).expect("a readable file");
        for (used, line) in crate_references(&text) {
            if used == module || used == "self" || used == "super" {
                continue;
            }
            match layer_of(layers, &used) {
                Some(layer) if layer > own_layer => {}
                Some(_) => violations.push(format!(
                    "{}:{line}: {module} uses {used}, which is not below it",
                    relative.display()
                )),
                None => {}
            }
        }
    }
    (violations, modules_seen.len())
}

#[test]
fn the_daemon_modules_depend_on_each_other_one_way() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (violations, seen) = violations(&source, LAYERS);
    assert!(seen >= 10, "the scan found the daemon's modules: {seen}");
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn the_actor_rooms_depend_on_each_other_one_way() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("actors/src");
    let (violations, seen) = violations(&source, ACTOR_LAYERS);
    assert!(seen >= 14, "the scan found the actors' rooms: {seen}");
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn the_cri_crate_modules_depend_on_each_other_one_way() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("cri/src");
    let (violations, seen) = violations(&source, CRI_LAYERS);
    assert_eq!(seen, 3, "the scan found the CRI crate's modules");
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

/// The CRI engine depends on the actors crate (its ports, the pod rules), never the other way:
/// not as a dependency, not in a path.
#[test]
fn the_actors_crate_names_no_cri_crate() {
    let actors = Path::new(env!("CARGO_MANIFEST_DIR")).join("actors");
    let manifest = std::fs::read_to_string(actors.join("Cargo.toml")).expect("actors/Cargo.toml");
    assert!(
        !manifest
            .lines()
            .any(|line| line.trim_start().starts_with("nodepulse-cri")),
        "actors/Cargo.toml depends on nodepulse-cri"
    );
    let mut files = Vec::new();
    rust_files(&actors.join("src"), &mut files);
    let naming: Vec<String> = files
        .iter()
        .filter(|file| {
            std::fs::read_to_string(file)
                .expect("a readable file")
                .contains("nodepulse_cri")
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(
        files.len() > 100,
        "the scan found the actors' files: {}",
        files.len()
    );
    assert!(
        naming.is_empty(),
        "actors files naming nodepulse_cri: {naming:?}"
    );
}

/// The CRI engine's files (`cri/src/provider/`) import one another one way: the state (the
/// engine's core, the pods' states, what the runtime holds, the pure rules) below, the
/// operations on it above. `Engine`'s methods are spread over files, one concern each, and call
/// one another freely; what a file takes from another (`super::x::…`) may not lead back to it.
#[test]
fn the_cri_engine_files_import_one_another_without_a_cycle() {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("cri/src/provider");
    let mut sources = BTreeMap::new();
    for entry in std::fs::read_dir(&directory).expect("the engine's directory") {
        let path = entry.expect("an entry").path();
        let Some(name) = path.file_stem().and_then(|stem| stem.to_str()) else {
            continue;
        };
        // The provider's root declares the files; tests sit beside what they test.
        if name == "mod" || name == "tests" || name.ends_with("_tests") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a readable file");
        // A file's own tests come last, behind `#[cfg(test)]`.
        let code = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or_default()
            .to_owned();
        sources.insert(name.to_owned(), code);
    }
    assert!(
        sources.len() >= 25,
        "the scan found the engine's files: {}",
        sources.len()
    );
    let imports: BTreeMap<&str, Vec<String>> = sources
        .iter()
        .map(|(name, code)| {
            let mut used: Vec<String> = references(code, "super::")
                .into_iter()
                .map(|(module, _)| module)
                .filter(|module| module != name && sources.contains_key(module))
                .collect();
            used.sort();
            used.dedup();
            (name.as_str(), used)
        })
        .collect();
    // Depth-first, with the path so far: a module met again on it closes a cycle.
    fn visit<'a>(
        module: &'a str,
        imports: &'a BTreeMap<&'a str, Vec<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<&'a str>> {
        if let Some(at) = path.iter().position(|on| *on == module) {
            let mut cycle = path[at..].to_vec();
            cycle.push(module);
            return Some(cycle);
        }
        if !done.insert(module) {
            return None;
        }
        path.push(module);
        for used in &imports[module] {
            if let Some(cycle) = visit(used, imports, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for module in imports.keys() {
        let cycle = visit(module, &imports, &mut Vec::new(), &mut done);
        assert!(
            cycle.is_none(),
            "an import cycle: {}",
            cycle.unwrap_or_default().join(" -> ")
        );
    }
}

#[test]
fn the_scan_sees_every_form_of_a_crate_path() {
    let text = "use crate::{\n    config::Settings,\n    node::{\n        NodeActors,\n        Parts,\n    },\n    apiserver_client::KubeApi,\n};\nuse crate::{debug, fleet::Fleet};\nlet x = crate::daemon::run(); // crate::ignored\n";
    let found = crate_references(text);
    let mut names: Vec<&str> = found.iter().map(|(name, _)| name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "apiserver_client",
            "config",
            "daemon",
            "debug",
            "fleet",
            "node"
        ]
    );
    let line = |module: &str| {
        found
            .iter()
            .find(|(name, _)| name == module)
            .map(|(_, line)| *line)
    };
    assert_eq!(
        line("apiserver_client"),
        Some(7),
        "the line after a nested group"
    );
    assert_eq!(line("daemon"), Some(10));
}
