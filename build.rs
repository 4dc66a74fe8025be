//! Builds of the daemon in the `ship` profile (what ships and what the benchmarks measure) on
//! x86_64 Linux (glibc), where rustc links with its own lld:
//! - the functions a running node executes are placed side by side, in the order
//!   `release/text-order.txt` lists them (`scripts/text-order.sh` makes it). The kernel maps a
//!   binary's text up to 64 KiB around every page a process touches (fault-around), so hot
//!   functions scattered among cold ones made 11.3 of the 15.7 MiB of text resident for a
//!   simulated node (packed: 3.3 MiB) and 16.0 of 21.1 MiB for a CRI node with 100 pods
//!   (packed: 8.1 MiB). A function the list does not name (new since the list was made) is
//!   only placed among the cold ones: a stale list never fails the build. The names are those
//!   of `cargo build --profile ship` (default features): symbol names carry hashes of the
//!   profile's settings and of each crate's resolved features, so a build without the
//!   `standalone` feature defines fewer of them (docs/operating/install.md).
//! - relative relocations are packed (`DT_RELR`, glibc 2.36 and later), in `release` builds
//!   too: 560 KiB of relocation entries that the loader reads at every start become a few KiB.
//!   Only when the build host's glibc supports it, as the binary then needs it at run time.
//!
//! Elsewhere (musl in the Dockerfile, other targets) the linker's defaults stay.

use std::path::Path;

fn main() {
    const ORDER: &str = "release/text-order.txt";
    println!("cargo:rerun-if-changed={ORDER}");
    // `PROFILE` says `release` for every profile that inherits from it (`ship` too).
    let release = std::env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let gnu_lld = std::env::var("TARGET").is_ok_and(|target| target == "x86_64-unknown-linux-gnu");
    if !(release && gnu_lld) {
        return;
    }
    // `release` itself is not optimised (Cargo.toml): its functions are other functions.
    let optimised = std::env::var("OPT_LEVEL").is_ok_and(|level| level != "0");
    if optimised && let Ok(manifest_dir) = std::env::var("CARGO_MANIFEST_DIR") {
        let order = Path::new(&manifest_dir).join(ORDER);
        if order.is_file() {
            link_arg(&format!("--symbol-ordering-file={}", order.display()));
            link_arg("--no-warn-symbol-ordering");
        }
    }
    if glibc_loads_relr() {
        link_arg("-z");
        link_arg("pack-relative-relocs");
    }
}

fn link_arg(arg: &str) {
    println!("cargo:rustc-link-arg-bin=nodepulse=-Wl,{arg}");
}

/// Whether the build host's glibc (2.36 and later) defines the symbol version a binary with
/// packed relocations requires; an older one could not load such a binary.
fn glibc_loads_relr() -> bool {
    const MARK: &[u8] = b"GLIBC_ABI_DT_RELR";
    [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
        "/usr/lib64/libc.so.6",
    ]
    .iter()
    .find_map(|path| std::fs::read(path).ok())
    .is_some_and(|libc| libc.windows(MARK.len()).any(|window| window == MARK))
}
