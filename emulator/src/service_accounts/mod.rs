//! ServiceAccounts as a cluster has them: the `default` ServiceAccount kube-controller-manager's
//! service-account controller creates in every namespace, the `token` subresource
//! (TokenRequest) kube-apiserver serves for them, and the admission plugin that makes every pod
//! run as one.

pub mod admission;
mod token;

use std::time::SystemTime;

use serde_json::json;

use crate::api::resource::SERVICE_ACCOUNTS;
use crate::store::Store;

pub use token::{ISSUER, create_token};

/// The ServiceAccount every namespace gets.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// Creates the namespace's `default` ServiceAccount unless it exists, as the controller does
/// right after a namespace appears.
pub fn ensure_default(store: &Store, namespace: &str, now: SystemTime) {
    let account = json!({"metadata": {"name": DEFAULT_SERVICE_ACCOUNT, "namespace": namespace}});
    match store.create(&SERVICE_ACCOUNTS, account, now) {
        Ok(_) => {}
        // There already, or gone with its namespace.
        Err(error) if matches!(error.code, 404 | 409) => {}
        Err(error) => {
            tracing::warn!(namespace, message = %error.message, "cannot create the default ServiceAccount");
        }
    }
}
