//! One node's actors, wired to the API port and added to the node's supervisor in start order.

use std::sync::Arc;

use nodepulse_actors::{
    lease::{LeaseActor, LeaseSettings},
    ports::LeaseApi,
};
use nodepulse_supervisor::{ChildSpec, SupervisorBuilder, mailbox};

use crate::{cli::Settings, kube_api::KubeApi};

/// Adds the node's actors to `builder`. Each actor's mailbox is created here, so peers can be
/// handed each other's addresses before any of them starts.
pub fn actors(
    builder: SupervisorBuilder,
    settings: &Settings,
    api: &Arc<KubeApi>,
) -> SupervisorBuilder {
    let capacity = settings.config.supervision.mailbox_capacity;
    let lease_api: Arc<dyn LeaseApi> = Arc::clone(api) as Arc<dyn LeaseApi>;
    let lease_settings = LeaseSettings {
        node: settings.node_name.clone(),
        lease_duration_seconds: settings.config.node_lease_duration_seconds,
    };
    let (_lease_address, lease_inbox) = mailbox(capacity);
    builder.child(ChildSpec::new("lease", lease_inbox, move || {
        LeaseActor::new(lease_settings.clone(), Arc::clone(&lease_api))
    }))
}
