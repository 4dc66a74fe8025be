//! `nodepulse`: parse, build, run until a signal or an escalation, exit with a code that says how
//! it ended (0 stopped, 1 could not run, 2 bad configuration, 3 escalated). A subcommand
//! (`check-config`, `status`, `config-reference`) runs instead of the daemon.

use std::process::ExitCode;

use clap::Parser;
use nodepulse::{
    cli::Cli,
    commands,
    daemon::{self, EXIT_CONFIG},
    heap, logging,
};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(command) = &cli.command {
        return ExitCode::from(commands::run(&cli, command));
    }
    let settings = match cli.settings() {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("nodepulse: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    if !settings.is_fleet() {
        heap::use_one_arena();
        heap::map_large_blocks();
    }
    logging::init(cli.log_format);
    let outcome = actix_rt::System::new().block_on(async {
        let shutdown = daemon::shutdown_signal();
        daemon::run(settings, shutdown).await
    });
    ExitCode::from(daemon::report(&outcome))
}
