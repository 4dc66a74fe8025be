//! The Kubernetes API vocabulary: served resources, request targets and `Status` errors.
//!
//! Everything here is pure data and parsing, shared by the store, the HTTP layer and the
//! controllers.

pub mod resource;
pub mod status;
pub mod target;
pub mod typed;

pub use resource::{ApiResource, StoredKind};
pub use status::{ApiError, FieldError};
pub use target::{Target, Verb};
