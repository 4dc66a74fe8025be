//! The book under `docs/` builds as `mdbook build docs` builds it — with mdBook's own library,
//! at the version Cargo.lock holds, so CI needs no mdbook binary — and mdBook has nothing to
//! warn about: a warning (an unclosed HTML tag, a footnote never referenced) fails the test as
//! an error does. The pages' links are `docs_links`'s.

use std::{
    fs,
    io::Write,
    path::Path,
    sync::{Arc, Mutex},
};

use mdbook_driver::MDBook;

const DOCS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs");

#[test]
fn the_book_builds_without_a_warning() {
    let out = tempfile::tempdir().expect("a temporary directory");
    let warnings = build(Path::new(DOCS), out.path()).expect("the book builds");
    assert!(warnings.is_empty(), "mdBook warned:\n{warnings}");
    for page in [
        "index.html",
        "ARCHITECTURE.html",
        "configuration.html",
        "benchmarks.html",
    ] {
        assert!(out.path().join(page).is_file(), "no {page} in the book");
    }
}

/// The test above can fail: the same book with an unclosed tag warns, and with a page its
/// summary names removed does not build.
#[test]
fn a_planted_fault_in_the_book_is_reported() {
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let copy = scratch.path().join("docs");
    copy_tree(Path::new(DOCS), &copy);
    let out = scratch.path().join("book");

    let mut page = fs::OpenOptions::new()
        .append(true)
        .open(copy.join("differences.md"));
    let page = page.as_mut().expect("the page opens");
    page.write_all(b"\n<div>never closed\n").expect("write");
    let warnings = build(&copy, &out).expect("a warning is not an error");
    assert!(
        warnings.contains("unclosed HTML tag"),
        "no warning: {warnings:?}"
    );

    fs::remove_file(copy.join("differences.md")).expect("remove a page");
    assert!(build(&copy, &out).is_err(), "a missing page was made up");
}

/// Builds the book at `root` into `out`; the warnings and errors mdBook logged on the way.
fn build(root: &Path, out: &Path) -> Result<String, String> {
    let mut book = MDBook::load(root).map_err(|e| format!("{e:#}"))?;
    book.config.build.build_dir = out.to_path_buf();
    let logged = Logged::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(logged.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || book.build()).map_err(|e| format!("{e:#}"))?;
    Ok(logged.text())
}

/// What a subscriber wrote, kept for the test to read.
#[derive(Clone, Default)]
struct Logged(Arc<Mutex<Vec<u8>>>);

impl Logged {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("not poisoned")).into_owned()
    }
}

impl Write for Logged {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .expect("not poisoned")
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logged {
    type Writer = Logged;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("a folder");
    for entry in fs::read_dir(from).expect("a readable folder") {
        let path = entry.expect("a folder entry").path();
        let target = to.join(path.file_name().expect("a name"));
        if path.is_dir() {
            copy_tree(&path, &target);
        } else {
            fs::copy(&path, &target).expect("a copy");
        }
    }
}
