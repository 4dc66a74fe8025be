//! `nodepulse check-config FILE`: the daemon's own validation of a configuration file, without
//! starting anything — `FILE: OK` and exit 0, or the field, value and reason and exit 2.

use std::path::Path;

use crate::{
    config::{Config, check_built},
    daemon::EXIT_CONFIG,
    kubelet_server,
};

pub fn run(file: &Path) -> u8 {
    // The kubelet API's certificate, key and client CA are read as the daemon would read them.
    let checked = Config::load(file)
        .map_err(|error| error.to_string())
        .and_then(|config| {
            let at_file = |error: &dyn std::fmt::Display| format!("{}: {error}", file.display());
            // `nodes:` is a valid file, but not one a build without the fleet simulator runs.
            check_built(false, !config.nodes.is_empty()).map_err(|error| at_file(&error))?;
            kubelet_server::tls::check(&config).map_err(|error| at_file(&error))
        });
    match checked {
        Ok(()) => {
            println!("{}: OK", file.display());
            0
        }
        Err(error) => {
            eprintln!("nodepulse: {error}");
            EXIT_CONFIG
        }
    }
}
