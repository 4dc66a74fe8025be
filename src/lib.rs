//! The nodepulse daemon: command line, configuration, the node's supervisor and the debug
//! endpoint. The actors live in `nodepulse-actors`, the CRI engine and client in
//! `nodepulse-cri`, the supervision runtime in `nodepulse-supervisor`; this crate wires them to
//! the outside world.
//!
//! Layout, top to bottom (a module uses only those below it; `tests/it/layering.rs` checks):
//! - `cli` (flags), `commands` (`check-config`, `status`, `config-reference`), `logging`
//! - `daemon`: one run, for one node or a fleet, and its exit codes
//! - `fleet` (many simulated nodes in one process), `standalone` (the in-process API emulator);
//!   both only with the `standalone` cargo feature (on by default; a node build leaves them out)
//! - `node`: one node's actors, wired to each other, the API and the host
//! - `kubelet_server`: the kubelet API's HTTPS server on `port` (authn/authz, logs, healthz);
//!   it reads the node's views and uses the adapters below
//! - `debug`: the HTTP endpoint; it sees only supervisors and a metrics registry
//! - adapters: `apiserver_client` (the API port over kube-rs), `probe_handlers` (exec,
//!   httpGet, tcpSocket, grpc), `host` and `machine` (the host's signals and facts),
//!   `volume_plugins` (pod volumes on disk: emptyDir, hostPath, CSI)
//! - `config`: the YAML file and the resolved `Settings`; `heap` (handing freed heap back);
//!   `listen` (binding a listener, and standalone mode's port of its own when the address is taken)
//! - `proc_stats`: what this process costs, from `/proc/self` (the heap trim's and the fleet's
//!   measures read it)

pub mod apiserver_client;
pub mod cli;
pub mod commands;
pub mod config;
pub mod daemon;
pub mod debug;
#[cfg(feature = "standalone")]
pub mod fleet;
pub mod heap;
pub mod host;
pub mod kubelet_server;
pub mod listen;
pub mod logging;
pub mod machine;
pub mod node;
pub mod probe_handlers;
pub mod proc_stats;
#[cfg(feature = "standalone")]
pub mod standalone;
pub mod volume_plugins;
