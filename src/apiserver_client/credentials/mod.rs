//! The node's certificates as the kubelet manages them: TLS bootstrap from a bootstrap
//! kubeconfig (`bootstrap`), the certificate directory (`store`), what each certificate is
//! for and asks for (`template`), the CSR round trip (`request`), the swappable certificate
//! (`certified`) that every API connection presents as the client certificate (`identity`,
//! built into the clients by `client`) and that the kubelet API serves (`serving`), and the
//! rotation of both (`rotation`, deadlines in `lifetime`). A bootstrap without rotation keeps
//! its key while its CSR is pending (`pending_key`) and names the CSR from it (`csr_name`), so
//! a restart waits on the CSR it made once it is found the same (`compatible`). Every file is
//! written new, never through a link at its name (`private_file`). Whether a
//! bootstrap is needed at all is `kubeconfig_validity`'s call.

pub mod bootstrap;
pub mod certified;
pub mod client;
pub mod compatible;
pub mod csr_name;
pub mod identity;
pub mod kubeconfig_validity;
pub mod lifetime;
pub mod pending_key;
pub mod private_file;
pub mod request;
pub mod rotation;
pub mod serving;
pub mod store;
pub mod template;

pub use bootstrap::{BootstrapError, ensure_client_certificate};
pub use identity::ClientIdentity;
pub use rotation::Rotation;
pub use serving::ServingIdentity;
pub use store::CertificateStore;
pub use template::Purpose;
