//! A Kubernetes API server emulator: the test double for kube-apiserver and the API server of
//! nodepulse's standalone mode.
//!
//! Layout:
//! - `api`: the served resources, request targets and `Status` errors (pure data).
//! - `store`: objects as JSON, the global resourceVersion, strategies, deletion, watch history.
//! - `patch`: strategic merge, JSON merge and JSON patches.
//! - `select`: label and field selectors.
//! - `http`: the actix-web front end (CRUD, watch, tables, discovery, auth, admin API).
//! - `lifecycle`: the node-lifecycle controller loop.
//! - `service_accounts`, `root_ca`: what every namespace has (the `default` ServiceAccount,
//!   the `kube-root-ca.crt` ConfigMap), TokenRequest and the ServiceAccount admission plugin;
//!   `namespace_controllers` puts those objects back when they are deleted.
//! - `kubeconfig`: kubeconfig files for the emulator.
//! - `request_log`: who made which request, in RBAC's terms (for tests deriving permissions).
//!
//! Public API: [`Emulator::start`] with an [`EmulatorConfig`] returns an [`EmulatorHandle`]
//! (base URL, kubeconfig, [`FaultHandle`], the served requests, shutdown); [`faults`] holds the fault-injection
//! vocabulary; [`time`] formats Kubernetes timestamps.

mod api;
mod certificates;
mod http;
pub mod kubeconfig;
pub mod kubelet_client;
mod lifecycle;
mod namespace_controllers;
mod patch;
mod request_log;
mod root_ca;
mod select;
mod server;
mod service_accounts;
mod serving;
mod store;
mod tls;

pub mod config;
pub mod faults;
pub mod time;

pub use api::{FieldError, StoredKind, Verb};
pub use config::{
    AttachDetachConfig, AuthConfig, EmulatorConfig, LifecycleConfig, User, WatchConfig,
};
pub use faults::{
    FaultAction, FaultCounters, FaultHandle, FaultRule, Outage, OutageError, OutageReport, Serving,
};
pub use request_log::RequestRecord;
pub use server::{BUILTIN_NAMESPACES, Emulator, EmulatorError, EmulatorHandle};
