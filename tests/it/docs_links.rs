//! Every link of README.md and of the book (`docs/`, built by mdBook) resolves inside the
//! repository: a relative link names a file or folder that exists without climbing out of the
//! repository, and a `#anchor` names a heading of its target by the slug mdBook and GitHub give
//! it. Web links are left alone, never followed. And every page of the book is in its summary.

use std::{
    collections::HashSet,
    fs,
    path::{Component, Path, PathBuf},
};

const REPO: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn every_link_of_the_readme_and_the_book_resolves_inside_the_repository() {
    let problems = broken_links(Path::new(REPO));
    assert!(
        problems.is_empty(),
        "{} broken links:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let docs = Path::new(REPO).join("docs");
    let summary = fs::read_to_string(docs.join("SUMMARY.md")).expect("docs/SUMMARY.md");
    let listed: HashSet<String> = links(&summary).into_iter().map(|l| l.target).collect();
    let unlisted: Vec<String> = markdown_under(&docs)
        .iter()
        .map(|page| relative(page, &docs))
        .filter(|page| page != "SUMMARY.md" && !listed.contains(page))
        .collect();
    assert!(
        unlisted.is_empty(),
        "pages not in docs/SUMMARY.md: {unlisted:?}"
    );
}

/// The checker itself: a repository with one link of each bad kind (and good ones beside them
/// that look alike) reports exactly the bad ones.
#[test]
fn a_planted_bad_link_of_each_kind_is_reported_and_nothing_else() {
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let repo = scratch.path().join("repo");
    fs::create_dir_all(repo.join("docs/sub")).expect("folders");
    // Exists, but beside the repository: a link to it leaves the repository.
    fs::create_dir_all(scratch.path().join("shared")).expect("folder");
    fs::write(scratch.path().join("shared/kit.md"), "# Kit\n").expect("write");
    fs::write(
        repo.join("README.md"),
        "# Top heading\n\
         [page](docs/a.md), [its heading](docs/a.md#a-heading-with-code), [here](#top-heading),\n\
         [web](https://example.invalid/x), `[in code](nowhere.md)`, [folder](docs/sub/)\n\
         ```\n[in a fence](nowhere.md)\n```\n\
         [missing](docs/nope.md) [no anchor](docs/a.md#no-such-heading) [out](../shared/kit.md)\n\
         [absolute](/etc/hostname) [self](#missing-here) [scheme](file:///etc/hostname)\n",
    )
    .expect("write");
    fs::write(
        repo.join("docs/a.md"),
        "# A heading, with `code`\n## A heading, with `code`\n[up](../README.md#top-heading)\n\
         [second](#a-heading-with-code-1) [down](sub/b.md) [climbs out](../../shared/kit.md)\n",
    )
    .expect("write");
    fs::write(repo.join("docs/sub/b.md"), "Setext\n======\n[s](#setext)\n").expect("write");

    let reported: Vec<(String, String)> = broken_links(&repo)
        .iter()
        .map(|problem| {
            let (file, rest) = problem.split_once(':').expect("file:line: target: why");
            let target = rest.split(": ").nth(1).expect("a target");
            (file.to_owned(), target.to_owned())
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("README.md", "docs/nope.md"),
        ("README.md", "docs/a.md#no-such-heading"),
        ("README.md", "../shared/kit.md"),
        ("README.md", "/etc/hostname"),
        ("README.md", "#missing-here"),
        ("README.md", "file:///etc/hostname"),
        ("docs/a.md", "../../shared/kit.md"),
    ]
    .iter()
    .map(|(file, target)| ((*file).to_owned(), (*target).to_owned()))
    .collect();
    assert_eq!(reported, expected);
}

#[test]
fn headings_slug_as_mdbook_and_github_slug_them() {
    assert_eq!(
        slug("Joining a cluster: TLS bootstrap and rotation"),
        "joining-a-cluster-tls-bootstrap-and-rotation"
    );
    assert_eq!(
        slug("Real pods, side by side, against the kubelet"),
        "real-pods-side-by-side-against-the-kubelet"
    );
    assert_eq!(
        slug("`--passes`: add more rustdoc passes"),
        "--passes-add-more-rustdoc-passes"
    );
    assert_eq!(
        slug("The node's [Lease](x.md) **now**"),
        "the-nodes-lease-now"
    );
}

/// `file:line: target: why` for every link of README.md and `docs/**/*.md` under `root` that
/// does not resolve, in file and line order.
fn broken_links(root: &Path) -> Vec<String> {
    let mut documents = vec![root.join("README.md")];
    documents.extend(markdown_under(&root.join("docs")));
    let mut problems = Vec::new();
    for document in documents {
        let text = fs::read_to_string(&document).expect("a readable Markdown file");
        for link in links(&text) {
            if let Err(why) = resolve(root, &document, &text, &link.target) {
                let file = relative(&document, root);
                problems.push(format!("{file}:{}: {}: {why}", link.line, link.target));
            }
        }
    }
    problems
}

/// Whether `target`, linked from `document` (whose text is `text`), names something inside
/// `root`, and a heading of it when it has an anchor.
fn resolve(root: &Path, document: &Path, text: &str, target: &str) -> Result<(), String> {
    let scheme = target.split_once(':').map(|(scheme, _)| scheme);
    if let Some(scheme) = scheme.filter(|s| s.chars().all(|c| c.is_ascii_alphanumeric())) {
        return match scheme {
            "http" | "https" | "mailto" => Ok(()),
            _ => Err(format!("a `{scheme}:` link leaves the repository")),
        };
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let named = if path.is_empty() {
        document.to_path_buf()
    } else if path.starts_with('/') {
        return Err("an absolute path: link relative to the page instead".to_owned());
    } else {
        let from = document.parent().expect("a document has a folder");
        inside(root, &from.join(path)).ok_or("leaves the repository")?
    };
    if !named.exists() {
        return Err("no such file or folder in the repository".to_owned());
    }
    if anchor.is_empty() {
        return Ok(());
    }
    if named.extension().is_none_or(|ext| ext != "md") {
        return Err("an anchor into something that is not a Markdown page".to_owned());
    }
    let own;
    let page = if named == document {
        text
    } else {
        own = fs::read_to_string(&named).map_err(|e| e.to_string())?;
        &own
    };
    if anchors(page).contains(anchor) {
        Ok(())
    } else {
        Err("no heading of the target has this anchor".to_owned())
    }
}

/// `path` without `.` and `..`, when it stays inside `root`.
fn inside(root: &Path, path: &Path) -> Option<PathBuf> {
    let mut kept: Vec<Component<'_>> = Vec::new();
    for component in path.strip_prefix(root).ok()?.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                kept.pop()?;
            }
            other => kept.push(other),
        }
    }
    Some(kept.iter().fold(root.to_path_buf(), |path, c| path.join(c)))
}

struct Link {
    line: usize,
    target: String,
}

/// The targets of inline links and images (`[text](target "title")`), reference definitions
/// and `href`/`src` attributes, outside code blocks and code spans.
fn links(text: &str) -> Vec<Link> {
    let mut found = Vec::new();
    for (index, line) in prose_lines(text) {
        let line_text = without_code_spans(line);
        let mut rest = line_text.as_str();
        while let Some(start) = rest.find("](") {
            rest = &rest[start + 2..];
            let end = closing_paren(rest);
            found.push(link_target(&rest[..end], index));
            rest = &rest[end..];
        }
        let trimmed = line_text.trim_start();
        if let Some((label, target)) = trimmed.strip_prefix('[').and_then(|r| r.split_once("]:")) {
            let plain_label = !label.is_empty() && !label.contains(['[', ']', '(', ')']);
            if plain_label && !target.trim().is_empty() {
                found.push(link_target(target.trim(), index));
            }
        }
        for attribute in ["href=\"", "src=\""] {
            for (at, _) in line_text.match_indices(attribute) {
                let value = &line_text[at + attribute.len()..];
                let value = value.split('"').next().unwrap_or_default();
                found.push(link_target(value, index));
            }
        }
    }
    found
}

fn link_target(raw: &str, index: usize) -> Link {
    let raw = raw.trim();
    let target = match raw.strip_prefix('<') {
        Some(bracketed) => bracketed.split('>').next().unwrap_or_default(),
        None => raw.split_whitespace().next().unwrap_or_default(),
    };
    Link {
        line: index + 1,
        target: target.to_owned(),
    }
}

/// Where the link target starting `rest` ends: its `)`, nested parentheses allowed.
fn closing_paren(rest: &str) -> usize {
    let mut depth = 0usize;
    for (at, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return at,
            ')' => depth -= 1,
            _ => {}
        }
    }
    rest.len()
}

/// The lines outside fenced code blocks, with their index.
fn prose_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fence: Option<&str> = None;
    text.lines().enumerate().filter(move |(_, line)| {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(marker)) => {
                fence = Some(marker);
                false
            }
            (Some(open), Some(marker)) if open == marker => {
                fence = None;
                false
            }
            (Some(_), _) => false,
            (None, None) => true,
        }
    })
}

/// `line` with every code span (`` `...` ``, any run of backticks) taken out.
fn without_code_spans(line: &str) -> String {
    let mut kept = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        kept.push_str(&rest[..start]);
        let ticks = rest[start..].len() - rest[start..].trim_start_matches('`').len();
        let after = &rest[start + ticks..];
        let closing = "`".repeat(ticks);
        match after.find(&closing) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                kept.push_str(&rest[start..start + ticks]);
                rest = after;
            }
        }
    }
    kept.push_str(rest);
    kept
}

/// The anchors of a page's headings (ATX and setext), numbered `-1`, `-2` when repeated.
fn anchors(text: &str) -> HashSet<String> {
    let mut used = HashSet::new();
    let mut previous = "";
    for (_, line) in prose_lines(text) {
        let heading = if let Some(rest) = line.strip_prefix('#') {
            let rest = rest.trim_start_matches('#');
            (line.len() - rest.len() <= 6 && rest.starts_with(' '))
                .then(|| rest.trim().trim_end_matches('#').trim())
        } else {
            let underline = !line.is_empty()
                && (line.trim_end().chars().all(|c| c == '=')
                    || line.trim_end().chars().all(|c| c == '-'));
            let paragraph = !previous.trim().is_empty()
                && !previous.starts_with(['#', '|', '-', '*', '>', ' ']);
            (underline && paragraph).then_some(previous.trim())
        };
        if let Some(heading) = heading {
            let id = slug(heading);
            let mut unique = id.clone();
            let mut counter = 0;
            while !used.insert(unique.clone()) {
                counter += 1;
                unique = format!("{id}-{counter}");
            }
        }
        previous = line;
    }
    used
}

/// A heading's anchor: its text as rendered (link targets, code and emphasis marks dropped),
/// lower-cased, letters, digits, `_` and `-` kept, white space turned into `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    while let Some(start) = rest.find("](") {
        text.push_str(&rest[..start]);
        rest = &rest[start + 2..];
        rest = &rest[(closing_paren(rest) + 1).min(rest.len())..];
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// Every `.md` file under `folder`, sorted.
fn markdown_under(folder: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut folders = vec![folder.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.map(|e| e.expect("a readable folder entry").path()) {
            if entry.is_dir() {
                folders.push(entry);
            } else if entry.extension().is_some_and(|ext| ext == "md") {
                found.push(entry);
            }
        }
    }
    found.sort();
    found
}

fn relative(path: &Path, root: &Path) -> String {
    let relative = path.strip_prefix(root).expect("a path under the root");
    relative.to_string_lossy().into_owned()
}
