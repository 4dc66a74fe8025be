//! Whether a daemon binary was built with a current text layout. A release build orders its
//! functions by `release/text-order.txt`, so the ones a node runs share few pages. Symbols carry
//! hashes of the build's metadata: once functions are renamed the list names ones no build
//! defines, the hot text is scattered again, and the daemon keeps several MiB more resident (at
//! 12d49be a stale list cost 14.5–15.1 MiB idle against 8.4–8.9 MiB). A figure of such a build
//! is not the build's figure, so `single` refuses one (as `scripts/text-order.sh --check` does
//! for the kit's benchmarks), unless told to measure any layout (a debug build has none).

use std::{collections::HashSet, path::Path, process::Command};

use serde_json::{Value, json};

/// The list, beside this crate in the repository.
const LIST: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../release/text-order.txt");

/// At least this share of the listed functions must be defined (the check's 95 %).
const CURRENT_PERCENT: usize = 95;

/// How many of the list's functions `binary` defines.
pub struct Coverage {
    pub listed: usize,
    pub defined: usize,
}

impl Coverage {
    pub fn current(&self) -> bool {
        self.defined * 100 >= self.listed * CURRENT_PERCENT
    }

    pub fn to_json(&self) -> Value {
        json!({"listed": self.listed, "defined": self.defined, "current": self.current()})
    }
}

/// The functions of `release/text-order.txt` that `binary` defines (its text symbols, read with
/// `nm`).
pub fn coverage(binary: &Path) -> Result<Coverage, String> {
    let list = std::fs::read_to_string(LIST).map_err(|error| format!("{LIST}: {error}"))?;
    let output = Command::new("nm")
        .arg("--defined-only")
        .arg(binary)
        .output()
        .map_err(|error| format!("nm {}: {error}", binary.display()))?;
    if !output.status.success() {
        return Err(format!(
            "nm {}: {}",
            binary.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let symbols = String::from_utf8_lossy(&output.stdout);
    let text: HashSet<&str> = symbols
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (_, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
            matches!(kind, "t" | "T" | "w" | "W").then_some(name)
        })
        .collect();
    let listed: HashSet<&str> = list.lines().filter(|line| !line.is_empty()).collect();
    Ok(Coverage {
        listed: listed.len(),
        defined: listed.iter().filter(|name| text.contains(*name)).count(),
    })
}

/// `binary`'s coverage, or an error when it is stale and `any_layout` is not set.
pub fn checked(binary: &Path, any_layout: bool) -> Result<Coverage, String> {
    let coverage = coverage(binary)?;
    if !coverage.current() && !any_layout {
        return Err(format!(
            "{} defines {} of the {} functions release/text-order.txt names (under {CURRENT_PERCENT} %): \
             its text layout is stale and its memory would not be the build's; regenerate the list \
             (scripts/text-order.sh) or measure anyway with --any-layout (a debug build)",
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
    fn the_share_of_listed_functions_decides_whether_a_layout_is_current() {
        let at = |defined| Coverage {
            listed: 100,
            defined,
        };
        assert!(at(100).current());
        assert!(at(95).current());
        assert!(!at(94).current());
        assert!(!at(0).current());
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
