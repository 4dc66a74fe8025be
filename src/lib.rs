//! The nodepulse daemon: command line, configuration, the node's supervisor and the debug
//! endpoint. The actors live in `nodepulse-actors`, the supervision runtime in
//! `nodepulse-supervisor`; this crate wires them to the outside world.
//!
//! Layout: `cli` (flags → settings), `commands` (`check-config`, `status`,
//! `config-reference`), `config` (the YAML file), `daemon` (one run, exit codes),
//! `debug` (the HTTP endpoint), `fleet` (many simulated nodes in one process), `kube_api` (the API port's kube-rs adapter), `logging`, `node` (one node's actors), `standalone` (the in-process API emulator),
//! `cri` and `host` (the runtime and host-signal adapters), `node_signals` (their two actors).

pub mod cli;
pub mod commands;
pub mod config;
pub mod cri;
pub mod daemon;
pub mod debug;
pub mod fleet;
pub mod host;
pub mod kube_api;
pub mod logging;
pub mod machine;
pub mod node;
pub mod node_signals;
pub mod standalone;
