//! The node's client credentials as the kubelet manages them: TLS bootstrap from a bootstrap
//! kubeconfig (`bootstrap`), the certificate directory (`store`), the CSR round trip
//! (`request`), the swappable client certificate every connection presents (`identity`, built
//! into the clients by `client`) and its rotation (`rotation`, deadlines in `lifetime`).

pub mod bootstrap;
pub mod client;
pub mod identity;
pub mod lifetime;
pub mod request;
pub mod rotation;
pub mod store;

pub use bootstrap::{BootstrapError, ensure_client_certificate};
pub use identity::ClientIdentity;
pub use rotation::Rotation;
pub use store::CertificateStore;
