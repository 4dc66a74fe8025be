//! Logging with `tracing`: human-readable by default, JSON lines with `--log-format json`,
//! filtered by `RUST_LOG` (default [`DEFAULT_FILTER`]). Actor spans carry `node` and `actor`, so
//! one grep follows one actor.

use clap::ValueEnum;
use tracing_subscriber::{EnvFilter, fmt};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LogFormat {
    #[default]
    Human,
    Json,
}

/// `info`, without kube-rs's line per failed request (`kube_client::client::builder: failed
/// with error …`, at ERROR) and per cut watch (`kube_client::client: eof in poll`, at WARN):
/// during an API outage they would repeat every failure, while `apiserver_client`'s reachability logs
/// the outage once, a reminder a minute, and the return (the watches' errors are at DEBUG).
pub const DEFAULT_FILTER: &str = "info,kube_client::client=error,kube_client::client::builder=off";

/// Installs the global subscriber; a second call (as in tests) leaves the first in place.
pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
}
