//! kube-apiserver's validation rules, word for word, for what both the API emulator and the
//! node check: `field_error` (one invalid field as `field.Error` prints it), `names` (DNS-1123
//! labels and subdomains), `quantity` (resource quantities as numbers), `qos` (a pod's QoS
//! class, which the API server persists and the kubelet reads) and `pod` (the parts of
//! `ValidatePodCreate` that reach the host or the runtime, which static pods must pass with no
//! API server to ask; `file_key_ref` its `fileKeyRef` rules). Pure: JSON in, errors out.

mod field_error;
mod file_key_ref;
pub mod names;
pub mod pod;
pub mod qos;
pub mod quantity;

pub use field_error::FieldError;
