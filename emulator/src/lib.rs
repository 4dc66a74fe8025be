//! A Kubernetes API server emulator: the test double for kube-apiserver and the API server of
//! nodepulse's standalone mode.
//!
//! Layout:
//! - [`api`]: the served resources, request targets and `Status` errors (pure data).
//! - [`store`]: objects as JSON, the global resourceVersion, strategies, deletion, watch history.
//! - [`patch`]: strategic merge, JSON merge and JSON patches.
//! - [`select`]: label and field selectors.
//! - `http`: the actix-web front end (CRUD, watch, discovery, auth, admin API).
//! - [`faults`]: fault injection rules, their handle and counters.
//! - `lifecycle`: the node-lifecycle controller loop.
//! - [`Emulator`]: starting it, and the [`EmulatorHandle`] tests and the daemon hold.

pub mod api;
pub mod patch;
pub mod select;
pub mod store;
pub mod time;

pub mod config;
pub mod faults;
mod http;
pub mod kubeconfig;
mod lifecycle;
mod server;

pub use config::{AuthConfig, EmulatorConfig, LifecycleConfig, User, WatchConfig};
pub use faults::{FaultAction, FaultCounters, FaultHandle, FaultRule};
pub use server::{BUILTIN_NAMESPACES, Emulator, EmulatorError, EmulatorHandle};
