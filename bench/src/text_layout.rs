//! Whether a daemon binary was built with a current text layout. A ship build (`cargo build
//! --profile ship`) orders its functions by `release/text-order.txt`, so the ones a node runs
//! share few pages. Symbols carry
//! hashes of the build's metadata: once functions are renamed the list names ones no build
//! defines, the hot text is scattered again, and the daemon keeps several MiB more resident (at
//! 12d49be a stale list cost 14.5–15.1 MiB idle against 8.4–8.9 MiB). A figure of such a build
//! is not the build's figure, so `single` refuses one, unless told to measure any layout (a
//! debug build has none). The judgement is `scripts/text-order.sh --check`'s, the one the kit's
//! benchmarks run: this only asks it and reads its answer.

use std::{path::Path, process::Command};

use serde_json::{Value, json};

/// The check, in the repository beside this crate.
const CHECK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/text-order.sh");

/// How many of the list's functions a binary defines, and whether the check found that enough.
pub struct Coverage {
    pub listed: usize,
    pub defined: usize,
    pub current: bool,
}

impl Coverage {
    pub fn to_json(&self) -> Value {
        json!({"listed": self.listed, "defined": self.defined, "current": self.current})
    }
}

/// The counts in the check's report, `<binary> defines D of the L functions <list> names`.
fn counts(report: &str) -> Option<(usize, usize)> {
    let line = report.lines().find(|line| line.contains(" defines "))?;
    let mut words = line.rsplit(" defines ").next()?.split_whitespace();
    let defined = words.next()?.parse().ok()?;
    let listed = words.nth(2)?.parse().ok()?;
    Some((defined, listed))
}

/// What `scripts/text-order.sh --check` says of `binary`.
pub fn coverage(binary: &Path) -> Result<Coverage, String> {
    let binary =
        std::path::absolute(binary).map_err(|error| format!("{}: {error}", binary.display()))?;
    let output = Command::new("bash")
        .arg(CHECK)
        .arg("--check")
        .arg(&binary)
        .output()
        .map_err(|error| format!("{CHECK}: {error}"))?;
    let report = String::from_utf8_lossy(&output.stderr);
    let (defined, listed) = counts(&report).ok_or_else(|| {
        format!(
            "{CHECK} --check {}: no count in its answer: {}",
            binary.display(),
            report.trim()
        )
    })?;
    Ok(Coverage {
        listed,
        defined,
        current: output.status.success(),
    })
}

/// `binary`'s coverage, or an error when it is stale and `any_layout` is not set.
pub fn checked(binary: &Path, any_layout: bool) -> Result<Coverage, String> {
    let coverage = coverage(binary)?;
    if !coverage.current && !any_layout {
        return Err(format!(
            "{} defines {} of the {} functions release/text-order.txt names (under 95 %): \
             its text layout is stale and its memory would not be the build's; regenerate the list \
             (scripts/text-order.sh), measure a ship build (`cargo build --profile ship`: no \
             other profile names its functions alike) or measure anyway with --any-layout (a \
             debug build)",
            binary.display(),
            coverage.defined,
            coverage.listed
        ));
    }
    Ok(coverage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checks_report_is_read_for_its_counts() {
        let report = "target/ship/nodepulse defines 4911 of the 5003 functions \
                      release/text-order.txt names\n";
        assert_eq!(counts(report), Some((4911, 5003)));
        let stale = "/x/nodepulse defines 237 of the 5003 functions release/text-order.txt \
                     names\nthe list is stale: run this script's steps again (see its head)\n";
        assert_eq!(counts(stale), Some((237, 5003)));
        assert_eq!(counts("nm: no such file\n"), None);
    }

    #[test]
    fn a_binary_without_the_listed_functions_is_refused_unless_any_layout_is_allowed() {
        // `nm` itself defines none of nodepulse's functions.
        let nm = Path::new("/usr/bin/nm");
        let error = checked(nm, false).err().expect("refused");
        assert!(
            error.contains("stale") && error.contains("--any-layout"),
            "{error}"
        );
        let measured = checked(nm, true).expect("allowed");
        assert_eq!(measured.defined, 0);
        assert!(measured.listed > 1000, "{}", measured.listed);
        assert_eq!(measured.to_json()["current"], false);
    }
}
