//! `nodepulse check-config FILE`: the daemon's own validation of a configuration file, without
//! starting anything — `FILE: OK` and exit 0, or the field, value and reason and exit 2.

use std::path::Path;

use crate::{config::Config, daemon::EXIT_CONFIG};

pub fn run(file: &Path) -> u8 {
    match Config::load(file) {
        Ok(_) => {
            println!("{}: OK", file.display());
            0
        }
        Err(error) => {
            eprintln!("nodepulse: {error}");
            EXIT_CONFIG
        }
    }
}
