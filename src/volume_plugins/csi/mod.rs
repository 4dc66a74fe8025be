//! CSI persistent volumes on this node, as the kubelet's `kubernetes.io/csi` plugin handles
//! them: the CSI v1 Node client over the driver's unix socket ([`client`], hand-written prost
//! messages in [`proto`]), the staging and publish layout ([`layout`]), the [`CsiNode`] port's
//! implementation ([`mounter`]) and the drivers registered through `plugins_registry`.
//!
//! [`CsiNode`]: nodepulse_actors::ports::CsiNode

pub mod client;
pub mod drivers;
pub mod grpc;
pub mod layout;
pub mod mounter;
pub mod proto;
pub mod registration;
pub mod registration_proto;
mod reply_fuzzing;
pub mod vol_data;

pub use client::{CSI_TIMEOUT, CsiClient};
pub use drivers::{CsiDrivers, RegisteredDriver};
pub use mounter::CsiMounter;
pub use registration::{CsiRegistrationHandler, RegistrationError};
#[doc(hidden)]
pub use reply_fuzzing::read_reply;
