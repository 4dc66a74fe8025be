//! Errors are typed (thiserror, causes kept as `#[source]`): a `Result<_, String>` in the
//! non-test code of the daemon, the actors, the CRI engine and the supervisor must be one of
//! [`ALLOWED`],
//! each with the reason a bare string is right there. A new one fails this test until it is
//! typed or argued for here; one that is gone must leave the list too.

use std::path::{Path, PathBuf};

use super::layering::rust_files;

/// The crates' source directories, from the workspace root.
const SCANNED: &[&str] = &["src", "actors/src", "cri/src", "supervisor/src"];

/// Why the CRI engine's four are text: each is the kubelet's message for a container that may
/// not start, shown verbatim as its waiting message (or the pull rule's input), never matched.
const KUBELET_MESSAGE: &str = "the kubelet's message for a container that may not start, \
     shown verbatim as its waiting message; nothing branches on it";

/// At most this many may be argued for.
const MAX_ALLOWED: usize = 10;

/// Each allowed site: its file, a piece of its line, and why a `String` is right there.
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "src/kubelet_server/healthz.rs",
        "type Check<'a>",
        "a check's reason is only ever shown as text (a log line, a 500 body) and joins the \
         supervisor's problems, which are text built from many actors",
    ),
    (
        "cri/src/provider/image.rs",
        "let present: Result<Option<String>, String>",
        "ImageStatus's error as the text the pure pull rule (`pods::images::next_step`) puts \
         in the container's ImageInspectError message",
    ),
    (
        "cri/src/provider/image.rs",
        ") -> Result<(), String>",
        KUBELET_MESSAGE,
    ),
    (
        "cri/src/provider/non_root.rs",
        ") -> Result<(), String>",
        KUBELET_MESSAGE,
    ),
    (
        "cri/src/provider/worker.rs",
        ") -> Result<Option<String>, String>",
        KUBELET_MESSAGE,
    ),
];

/// One `Result<…, String>` found: file (from the workspace root, `/`-separated), line, text.
#[derive(Debug)]
struct Site {
    file: String,
    line: usize,
    text: String,
}

/// `text` with its comments gone and the insides of its string and char literals blanked,
/// every line kept (and so every line number): a `Result<` or a brace in a message, or a
/// `//` in a URL, is then no code.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        let next = chars.get(at + 1).copied();
        let identifier_before = at > 0 && (chars[at - 1].is_alphanumeric() || chars[at - 1] == '_');
        if c == '/' && next == Some('/') {
            while at < chars.len() && chars[at] != '\n' {
                at += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            at += 2;
            while at < chars.len() && !(chars[at] == '*' && chars.get(at + 1) == Some(&'/')) {
                out.push(blank(chars[at]));
                at += 1;
            }
            at += 2;
            continue;
        }
        // A raw string: r"…", r#"…"#, br"…".
        let raw_prefix = c == 'r' && (!identifier_before || (at > 0 && chars[at - 1] == 'b'));
        if raw_prefix {
            let hashes = chars[at + 1..].iter().take_while(|&&h| h == '#').count();
            if chars.get(at + 1 + hashes) == Some(&'"') {
                out.push('r');
                out.extend(std::iter::repeat_n('#', hashes));
                out.push('"');
                at += hashes + 2;
                let closes = |from: usize| {
                    chars[from] == '"'
                        && (1..=hashes).all(|offset| chars.get(from + offset) == Some(&'#'))
                };
                while at < chars.len() && !closes(at) {
                    out.push(blank(chars[at]));
                    at += 1;
                }
                out.push('"');
                out.extend(std::iter::repeat_n('#', hashes));
                at += hashes + 1;
                continue;
            }
        }
        if c == '"' {
            out.push('"');
            at += 1;
            while at < chars.len() && chars[at] != '"' {
                if chars[at] == '\\' {
                    out.push(' ');
                    at += 1;
                }
                if let Some(&inside) = chars.get(at) {
                    out.push(blank(inside));
                }
                at += 1;
            }
            out.push('"');
            at += 1;
            continue;
        }
        // A char literal ('{', '\''); a lifetime ('a) has no closing quote right after.
        if c == '\'' && next == Some('\\') {
            let close = (at + 3..chars.len()).find(|&end| chars[end] == '\'');
            let end = close.unwrap_or(chars.len() - 1);
            out.push_str("' '");
            at = end + 1;
            continue;
        }
        if c == '\'' && chars.get(at + 2) == Some(&'\'') {
            out.push_str("' '");
            at += 3;
            continue;
        }
        out.push(c);
        at += 1;
    }
    out
}

/// The offset just past the `}` that closes the `{` at `open` (literals already blanked).
fn block_end(code: &str, open: usize) -> usize {
    let mut depth = 0usize;
    for (at, byte) in code.bytes().enumerate().skip(open) {
        match byte {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return at + 1;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// `code` with every `#[cfg(test)]` item blanked (lines kept): up to its `;` when that
/// comes before any `{`, else through its block.
fn without_test_items(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut from = 0;
    while let Some(found) = code[from..].find(MARK) {
        let start = from + found;
        out.push_str(&code[from..start]);
        let after = start + MARK.len();
        let semicolon = code[after..].find(';').map(|at| after + at);
        let brace = code[after..].find('{').map(|at| after + at);
        let end = match (semicolon, brace) {
            (Some(semicolon), Some(brace)) if semicolon < brace => semicolon + 1,
            (Some(semicolon), None) => semicolon + 1,
            (_, Some(brace)) => block_end(code, brace),
            (None, None) => code.len(),
        };
        out.push_str(&"\n".repeat(code[start..end].matches('\n').count()));
        from = end;
    }
    out.push_str(&code[from..]);
    out
}

/// The files `#[cfg(test)] mod x;` (with or without `#[path]`) in `file` brings in.
fn test_module_files(file: &Path, code: &str) -> Vec<PathBuf> {
    let directory = file.parent().expect("a directory");
    let stem = file.file_stem().and_then(|s| s.to_str()).expect("a name");
    let own_directory = match stem {
        "mod" | "lib" | "main" => directory.to_path_buf(),
        _ => directory.join(stem),
    };
    let mut found = Vec::new();
    for (at, _) in code.match_indices("#[cfg(test)]") {
        let rest = code[at + "#[cfg(test)]".len()..].trim_start();
        let (path, rest) = match rest.strip_prefix("#[path = \"") {
            Some(tail) => {
                let (path, tail) = tail.split_once("\"]").expect("a closed path attribute");
                (Some(path), tail.trim_start())
            }
            None => (None, rest),
        };
        let rest = rest.strip_prefix("pub(crate) ").unwrap_or(rest);
        let Some(declaration) = rest.strip_prefix("mod ") else {
            continue;
        };
        let Some((name, _)) = declaration.split_once(';') else {
            continue;
        };
        if name.contains('{') {
            continue;
        }
        match path {
            Some(path) => found.push(directory.join(path)),
            None => {
                found.push(own_directory.join(format!("{}.rs", name.trim())));
                found.push(own_directory.join(name.trim()).join("mod.rs"));
            }
        }
    }
    found
}

/// Every `Result<…, String>` in `code` (comments and test items already gone): the offset of
/// each `Result<` whose second top-level argument is exactly `String`.
fn string_results(code: &str) -> Vec<usize> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    for (at, _) in code.match_indices("Result<") {
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let open = at + "Result".len();
        let (mut depth, mut argument_start, mut arguments) = (0usize, open + 1, Vec::new());
        for (index, &byte) in bytes.iter().enumerate().skip(open) {
            let arrow = byte == b'>' && bytes[index - 1] == b'-';
            match byte {
                b'<' | b'(' | b'[' => depth += 1,
                b'>' | b')' | b']' if !arrow => {
                    depth -= 1;
                    if depth == 0 {
                        arguments.push(&code[argument_start..index]);
                        break;
                    }
                }
                b',' if depth == 1 => {
                    arguments.push(&code[argument_start..index]);
                    argument_start = index + 1;
                }
                _ => {}
            }
        }
        if let [_, error] = arguments.as_slice()
            && error.trim() == "String"
        {
            found.push(at);
        }
    }
    found
}

/// Every `Result<…, String>` in the non-test code of the scanned crates.
fn sites(root: &Path) -> Vec<Site> {
    let mut files = Vec::new();
    for directory in SCANNED {
        rust_files(&root.join(directory), &mut files);
    }
    let mut test_files = Vec::new();
    let mut texts = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a readable file");
        test_files.extend(test_module_files(file, &text));
        texts.push((file, text));
    }
    let mut sites = Vec::new();
    for (file, text) in texts {
        let relative = file
            .strip_prefix(root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        if test_files.contains(file) {
            continue;
        }
        let code = without_test_items(&code_only(&text));
        for at in string_results(&code) {
            let line = code[..at].matches('\n').count() + 1;
            let text = text.lines().nth(line - 1).unwrap_or("").trim().to_owned();
            sites.push(Site {
                file: relative.clone(),
                line,
                text,
            });
        }
    }
    sites
}

#[test]
fn every_string_error_left_is_argued_for() {
    assert!(
        ALLOWED.len() <= MAX_ALLOWED,
        "at most {MAX_ALLOWED} allowed"
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = sites(root);
    let allowed = |site: &Site| {
        ALLOWED
            .iter()
            .any(|(file, piece, _)| site.file == *file && site.text.contains(piece))
    };
    let unargued: Vec<String> = found
        .iter()
        .filter(|site| !allowed(site))
        .map(|site| format!("{}:{}: {}", site.file, site.line, site.text))
        .collect();
    assert!(
        unargued.is_empty(),
        "Result<_, String> outside the allowed list: type the error (thiserror, #[source] kept) \
         or argue for it in ALLOWED:\n{}",
        unargued.join("\n")
    );
    for (file, piece, why) in ALLOWED {
        assert!(!why.trim().is_empty(), "{file}: no reason given");
        assert!(
            found
                .iter()
                .any(|site| site.file == *file && site.text.contains(piece)),
            "{file} ({piece}) has no Result<_, String> any more: remove it from ALLOWED"
        );
    }
}

#[test]
fn the_scan_sees_every_form_of_a_string_result() {
    let text = r#"
fn a() -> Result<(), String> {}
fn b(
) -> Result<(http::StatusCode, Option<String>, Vec<u8>),
    String> {}
let c = |x: &str| -> Result<Vec<u8>, String> { Ok(vec![b'{']) };
type D<'a> = Box<dyn Fn() -> Result<(), String> + 'a>;
static E: OnceLock<Result<Arc<Config>, String>> = OnceLock::new();
fn not_f() -> Result<BTreeMap<String, String>, Error> {}
fn not_g() -> io::Result<String> {}
fn not_h() -> ApiResult<String> {}
// fn not_i() -> Result<(), String>
#[cfg(test)]
fn not_j() -> Result<(), String> {}
#[cfg(test)]
mod tests {
    fn not_k() -> Result<(), String> { let brace = '}'; let text = "}"; }
}
fn l() -> Result<String, String> {}
"#;
    let code = without_test_items(&code_only(text));
    let lines: Vec<usize> = string_results(&code)
        .into_iter()
        .map(|at| code[..at].matches('\n').count() + 1)
        .collect();
    assert_eq!(lines, [2, 4, 6, 7, 8, 19]);
}

#[test]
fn the_scan_knows_which_files_are_test_modules() {
    let code = "#[cfg(test)]\nmod tests;\n#[cfg(test)]\n#[path = \"url_tests.rs\"]\nmod tests;\n#[cfg(test)]\nmod inline {}\n";
    let found = test_module_files(Path::new("src/node/url.rs"), code);
    assert_eq!(
        found,
        [
            PathBuf::from("src/node/url/tests.rs"),
            PathBuf::from("src/node/url/tests/mod.rs"),
            PathBuf::from("src/node/url_tests.rs"),
        ]
    );
}
