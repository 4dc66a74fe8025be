//! The commands besides running the daemon: `check-config`, `status` and `config-reference`.
//! Each returns the process exit code; `main` only dispatches here.

mod check_config;
pub mod status;

use crate::{
    cli::{Cli, Command},
    config::reference,
};

/// Runs `command` with the global flags of `cli`; returns the exit code.
pub fn run(cli: &Cli, command: &Command) -> u8 {
    match command {
        Command::CheckConfig { file } => check_config::run(file),
        Command::Status => status::run(cli),
        Command::ConfigReference => {
            print!("{}", reference::markdown());
            0
        }
    }
}
